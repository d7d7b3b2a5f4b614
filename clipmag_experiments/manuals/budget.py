"""The manuals' tables of the budget sweep (``results/budget``), rendered from its cells.

The budget sweep (``configs/sweeps/budget.yaml``) asks whether the positive-regime null - no
magnitude head significantly above cosine - is an artefact of short fine-tunes: each start and head
is tested at three budgets per task, checkpoints of one run under a constant rate. Every block here
is named in docs/experiments.md or README.md (``<!-- results:budget... -->``) and re-rendered by
``clipmag-report docs`` (:mod:`clipmag_experiments.manuals.sync`), so a re-run or a withdrawn
cell changes the manuals' numbers, never leaves them stale. Groups that have not run yet are left
out of a table, which says so in its last line.

What the prose says the sweep shows - a head "above", "below" or "level with" cosine at a budget,
how far cosine falls between two budgets, how wide the intervals are, how many marks survive Holm
over the whole table - is written as ``<!-- value:NAME:ARGUMENT -->`` marks, so a sentence that no
longer matches its table is stale for the drift check, like a table. The argument names the row:
``budget-verdict:cranfield/splade/dnorm/smallest`` is dnorm's verdict against cosine for SPLADE on
Cranfield at the task's smallest budget.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from clipmag.results.marks import family_mark
from clipmag.results.marks import verdict as verdict_of
from clipmag.results.significance import Comparison, with_family_holm
from clipmag_experiments.design.protocol import PROTOCOL_FILE
from clipmag_experiments.manuals.positive_regime import (
    DATASETS,
    STARTS,
    head_cell,
    lr_grid_table,
    order,
    p_and_t,
    scale_grid_table,
)
from clipmag_experiments.report.collect import CellResult
from clipmag_experiments.report.curves import pairs_seen
from clipmag_experiments.report.starts import HeadResult, StartRow
from clipmag_experiments.report.stored import StoredResults, StoredSweep, runs_value, time_value

__all__ = ["BLOCKS", "VALUES", "SWEEP", "BUDGETS", "HEADS", "table_rows"]

SWEEP = "budget"
HEADS = ("cosine", "qnorm", "dnorm")
# the protocol's compared groups (comparison.groups), per task from the smallest budget up, and the
# size of each task's training set (an epoch)
BUDGETS = {
    "code-search": ("code-search-576", "code-search-2688", "code-search-12544"),
    "scifact": ("scifact-448", "scifact-2048", "scifact-9216"),
}
TRAINING_PAIRS = {"code-search": 2500, "scifact": 919}
SELECTION_GROUP = "code-search-2688"  # the budget the dev grids ran at, whose cells carry the choice
POSITIONS = ("smallest", "middle", "largest")  # how a value names one of a task's three budgets


def _finished(sweep: StoredSweep) -> list[str]:
    groups = {c.cell["group"] for c in sweep.cells}
    return [g for budgets in BUDGETS.values() for g in budgets if g in groups]


def _task(group: str) -> str:
    return next(task for task, groups in BUDGETS.items() if group in groups)


def _pairs(sweep: StoredSweep, row: StartRow) -> int:
    seen = {pairs_seen(c) for c in sweep.group(row.group) if c.cell["model"] == row.start}
    if len(seen) != 1:
        raise ValueError(f"{sweep.folder}: group {row.group!r} of {row.start} has cells at {sorted(seen)} pairs")
    return seen.pop()


def table_rows(sweep: StoredSweep) -> list[tuple[StartRow, int]]:
    """(row, pairs seen) of every finished compared group: by test set, start, then budget; each
    comparison with its Holm over the whole table (``p_family``), the family the sweep's verdict
    rests on (every magnitude head at every budget, start and test set)."""
    groups = _finished(sweep)
    rows = [r for r in sweep.start_rows if r.group in groups]
    rows.sort(key=lambda r: (order(r.dataset, list(DATASETS)), order(r.start, STARTS), groups.index(r.group)))
    tested = [r.heads[h] for r in rows for h in HEADS[1:] if h in r.heads and r.heads[h].comparison is not None]
    for head, comparison in zip(tested, with_family_holm([h.comparison for h in tested])):
        head.comparison = comparison  # the same family every time: rendering twice changes nothing
    return [(r, _pairs(sweep, r)) for r in rows]


def _unfinished_note(sweep: StoredSweep) -> list[str]:
    done = set(_finished(sweep))
    missing = [g for budgets in BUDGETS.values() for g in budgets if g not in done]
    return [f"\n_Not run yet: {', '.join(f'`{g}`' for g in missing)}._"] if missing else []


def _d_after(row: StartRow) -> str:
    means = [np.mean(row.heads[h].cohens_d) if h in row.heads and row.heads[h].cohens_d else None for h in HEADS]
    return " / ".join("-" if d is None else f"{d:+.2f}" for d in means)


def budget_table(stored: StoredResults) -> str:
    """Every compared group: nDCG@10 x100 per head (seed mean ± std, dev-chosen scale as a subscript)
    against cosine of the same budget, start and test set, with the tests; Cohen's d after training."""
    sweep = stored.sweep(SWEEP)
    lines = [
        "| test set | start | pairs seen (epochs) | " + " | ".join(HEADS) + " | d after (" + " / ".join(HEADS) + ") |",
        "|---" * (len(HEADS) + 4) + "|",
    ]
    for row, pairs in table_rows(sweep):
        epochs = pairs / TRAINING_PAIRS[_task(row.group)]
        cells = " | ".join(head_cell(row, h, spread=True, tests=p_and_t) for h in HEADS)
        label = DATASETS.get(row.dataset, row.dataset)
        lines.append(f"| {label} | {row.start} | {pairs:,} ({epochs:.1f}) | {cells} | {_d_after(row)} |")
    return "\n".join(lines + _unfinished_note(sweep))


def gap_table(stored: StoredResults) -> str:
    """The answer in one view: each magnitude head's difference to cosine (x100, with its 95% interval)
    at the smallest, middle and largest budget, per start and test set."""
    sweep = stored.sweep(SWEEP)
    found: dict[tuple[str, str, str], dict[int, str]] = {}
    for row, _ in table_rows(sweep):
        position = BUDGETS[_task(row.group)].index(row.group)
        for head in HEADS[1:]:
            c = row.heads[head].comparison if head in row.heads else None
            if c is not None:
                text = f"{100 * c.difference:+.2f} [{100 * c.ci_low:+.2f}, {100 * c.ci_high:+.2f}]"
                found.setdefault((row.dataset, row.start, head), {})[position] = text
    lines = ["| test set | start | head | smallest budget | middle | largest |", "|---" * 6 + "|"]
    for (dataset, start, head), by_budget in found.items():
        cells = " | ".join(by_budget.get(i, "-") for i in range(3))
        lines.append(f"| {DATASETS.get(dataset, dataset)} | {start} | {head} | {cells} |")
    return "\n".join(lines + _unfinished_note(sweep))


def _groups(sweep: StoredSweep) -> list[str]:
    """The stored groups in the sweep's order: the dev grids, then each task's budgets."""
    known = ["lr-grid", "scale-grid", *(g for groups in BUDGETS.values() for g in groups)]
    return sorted({c.cell["group"] for c in sweep.cells}, key=lambda g: order(g, known))


def time_table(stored: StoredResults) -> str:
    """What each group cost, measured: its cells' training and testing seconds (a continued cell
    counts only the steps it added), in minutes."""
    sweep = stored.sweep(SWEEP)
    lines = ["| group | cells | training | testing |", "|---" * 4 + "|"]
    total = np.zeros(2)
    for group in _groups(sweep):
        cells = sweep.group(group)
        seconds = np.array([[c.results["timings"][k] for k in ("train_seconds", "test_seconds")] for c in cells])
        spent = seconds.sum(axis=0)
        total += spent
        lines.append(f"| `{group}` | {len(cells)} | {spent[0] / 60:.1f} min | {spent[1] / 60:.1f} min |")
    lines.append(f"| all | {len(sweep.cells)} | {total[0] / 60:.1f} min | {total[1] / 60:.1f} min |")
    return "\n".join(lines)


def _stated_rates(sweep: StoredSweep) -> dict[str, float]:
    """The training throughputs (pairs/s per start) the sweep's plan stated, from its ``sweep.json``."""
    record = json.loads((sweep.folder / PROTOCOL_FILE).read_text(encoding="utf-8"))
    stated = record["starts"][-1]["config"]["plan"]["cpu_pairs_per_second"]
    return {model: float(rate) for model, rate in stated.items()}


def _pairs_added(sweep: StoredSweep, cell: CellResult) -> int:
    """The pairs a cell trained itself: a continued cell counts only what it added to the one it continues."""
    continued = cell.cell.get("continues")
    if not continued:
        return pairs_seen(cell)
    place = Path(continued).parts[-4:]  # group / model / head / seed
    earlier = next(c for c in sweep.cells if c.directory.relative_to(sweep.folder).parts[-4:] == place)
    return pairs_seen(cell) - pairs_seen(earlier)


def _plan(sweep: StoredSweep) -> dict[str, tuple[int, float]]:
    """Per group (in the sweep's order): the pairs its cells trained and their CPU-hours at the
    throughputs the sweep stated."""
    rates = _stated_rates(sweep)
    plan = {}
    for group in _groups(sweep):
        pairs = [(_pairs_added(sweep, c), rates[c.cell["model"]]) for c in sweep.group(group)]
        plan[group] = (sum(p for p, _ in pairs), sum(p / rate / 3600 for p, rate in pairs))
    return plan


def plan_table(stored: StoredResults) -> str:
    """What the plan (``clipmag-sweep plan``) puts the training at: per group the pairs its cells
    train and their CPU-hours at the sweep's stated throughputs, from the stored cells and
    ``sweep.json`` (the plan itself needs the models; these are its figures without them)."""
    plan = _plan(stored.sweep(SWEEP))
    lines = ["| group | pairs trained | CPU-hours |", "|---" * 3 + "|"]
    lines += [f"| {group} | {pairs:,} | {hours:.2f} |" for group, (pairs, hours) in plan.items()]
    total = np.sum(list(plan.values()), axis=0)
    return "\n".join([*lines, f"| total | {int(total[0]):,} | {total[1]:.2f} |"])


def plan_hours(stored: StoredResults, argument: str = "") -> str:
    """The plan's training CPU-hours over every group."""
    return f"{sum(hours for _, hours in _plan(stored.sweep(SWEEP)).values()):.2f}"


def plan_rates(stored: StoredResults, argument: str = "") -> str:
    """The training throughputs the sweep stated: ``splade 30, minilm-dot 48`` (pairs/s)."""
    return ", ".join(f"{model} {rate:g}" for model, rate in _stated_rates(stored.sweep(SWEEP)).items())


def _parts(argument: str, names: tuple[str, ...], value: str) -> list[str]:
    parts = argument.split("/")
    if len(parts) != len(names):
        raise ValueError(f"value {value}: expected {'/'.join(names)}, got {argument!r}")
    return parts


def _head(stored: StoredResults, dataset: str, start: str, head: str, position: str) -> HeadResult:
    """One head's result at one budget (``smallest`` / ``middle`` / ``largest`` of the task)."""
    if position not in POSITIONS:
        raise ValueError(f"budget {position!r}: one of {', '.join(POSITIONS)}")
    for row, _ in table_rows(stored.sweep(SWEEP)):
        budgets = next(groups for groups in BUDGETS.values() if row.group in groups)
        if (row.dataset, row.start) == (dataset, start) and budgets.index(row.group) == POSITIONS.index(position):
            if head not in row.heads:
                raise ValueError(f"{SWEEP}: no {head} for {start} on {dataset} at the {position} budget")
            return row.heads[head]
    raise ValueError(f"{SWEEP}: no row for {start} on {dataset!r} at the {position} budget")


def _comparison(stored: StoredResults, argument: str, value: str) -> Comparison:
    dataset, start, head, position = _parts(argument, ("DATASET", "START", "HEAD", "BUDGET"), value)
    comparison = _head(stored, dataset, start, head, position).comparison
    if comparison is None:
        raise ValueError(f"{SWEEP}: {head} of {start} on {dataset} at the {position} budget has no test against cosine")
    return comparison


def verdict(stored: StoredResults, argument: str) -> str:
    """``DATASET/START/HEAD/BUDGET``: ``above`` / ``below`` / ``level`` - the row's mark against cosine."""
    return verdict_of(_comparison(stored, argument, "budget-verdict"))


def verdicts(stored: StoredResults, argument: str) -> str:
    """``DATASET/START/HEAD``: the row marks from the smallest budget to the largest, in words
    (``below, level, above``)."""
    dataset, start, head = _parts(argument, ("DATASET", "START", "HEAD"), "budget-verdicts")
    return ", ".join(verdict_of(_head(stored, dataset, start, head, p).comparison) for p in POSITIONS)


def _table_marked(stored: StoredResults, direction: str) -> list[tuple[StartRow, str]]:
    """(row, head) of every comparison the whole-table Holm keeps ``above`` or ``below`` cosine."""
    if direction not in ("above", "below"):
        raise ValueError(f"direction {direction!r}: above or below")
    return [
        (row, head)
        for row, _ in table_rows(stored.sweep(SWEEP))
        for head in HEADS[1:]
        if head in row.heads and family_mark(c := row.heads[head].comparison) and verdict_of(c) == direction
    ]


def table_marked(stored: StoredResults, argument: str) -> str:
    """``above`` / ``below``: each comparison that stays marked under Holm over the whole table."""
    found = []
    for row, head in _table_marked(stored, argument):
        position = POSITIONS[next(g for g in BUDGETS.values() if row.group in g).index(row.group)]
        found.append(f"{row.start}'s {head} on {DATASETS.get(row.dataset, row.dataset)} at the {position} budget")
    return "; ".join(found) or "none"


def table_starts(stored: StoredResults, argument: str) -> str:
    """``above`` / ``below``: how many comparisons stay marked under Holm over the whole table, and
    the starts they come from (``11, all from minilm-dot``)."""
    marked = _table_marked(stored, argument)
    starts = sorted({row.start for row, _ in marked})
    return f"{len(marked)}, all from {starts[0]}" if len(starts) == 1 else f"{len(marked)}, from {', '.join(starts)}"


def difference(stored: StoredResults, argument: str) -> str:
    """``DATASET/START/HEAD/BUDGET``: the mean per-query difference to cosine, x100."""
    return f"{100 * _comparison(stored, argument, 'budget-difference').difference:+.2f}"


def mean(stored: StoredResults, argument: str) -> str:
    """``DATASET/START/HEAD/BUDGET``: nDCG@10 x100, mean over seeds."""
    dataset, start, head, position = _parts(argument, ("DATASET", "START", "HEAD", "BUDGET"), "budget-mean")
    return f"{100 * _head(stored, dataset, start, head, position).mean:.2f}"


def change(stored: StoredResults, argument: str) -> str:
    """``DATASET/START/HEAD/FROM/TO``: how far the head's seed mean moves between two budgets, x100."""
    dataset, start, head, first, last = _parts(argument, ("DATASET", "START", "HEAD", "FROM", "TO"), "budget-change")
    before, after = (_head(stored, dataset, start, head, p).mean for p in (first, last))
    return f"{100 * (after - before):+.2f}"


def interval_widths(stored: StoredResults, argument: str = "") -> str:
    """``1.2-7.9``: the narrowest and widest 95% interval of the table's differences, x100."""
    widths = [100 * (c.ci_high - c.ci_low) for c in _tested(stored)]
    return f"{min(widths):.1f}-{max(widths):.1f}"


def _tested(stored: StoredResults) -> list[Comparison]:
    return [
        c
        for row, _ in table_rows(stored.sweep(SWEEP))
        for head in HEADS[1:]
        if head in row.heads and (c := row.heads[head].comparison) is not None
    ]


def survivors(stored: StoredResults, argument: str = "") -> str:
    """``14 of 48``: the marks of the table that survive Holm over all of its tests (†)."""
    tested = _tested(stored)
    return f"{sum(1 for c in tested if family_mark(c))} of {len(tested)}"


def tests(stored: StoredResults, argument: str = "") -> str:
    """How many tests the table holds: the family of its whole-table Holm."""
    return str(len(_tested(stored)))


BLOCKS: dict[str, Callable[[StoredResults], str]] = {
    "budget": budget_table,
    "budget-gap": gap_table,
    "budget-time": time_table,
    "budget-plan": plan_table,
    "budget-lr-grid": lambda stored: lr_grid_table(stored.sweep(SWEEP), SELECTION_GROUP),
    "budget-scale-grid": lambda stored: scale_grid_table(stored.sweep(SWEEP), SELECTION_GROUP),
}
VALUES: dict[str, Callable[[StoredResults, str], str]] = {
    "budget-runs": runs_value(SWEEP),
    "budget-hours": time_value(SWEEP, "hours"),
    "budget-plan-hours": plan_hours,
    "budget-plan-rates": plan_rates,
    "budget-verdict": verdict,
    "budget-verdicts": verdicts,
    "budget-table-marked": table_marked,
    "budget-table-starts": table_starts,
    "budget-difference": difference,
    "budget-mean": mean,
    "budget-change": change,
    "budget-widths": interval_widths,
    "budget-survivors": survivors,
    "budget-tests": tests,
}
