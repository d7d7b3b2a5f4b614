"""The manuals' tables of the budget sweep (``results/budget``), rendered from its cells.

The budget sweep (``configs/sweeps/budget.yaml``) asks whether the positive-regime null - no
magnitude head significantly above cosine - is an artefact of short fine-tunes: each start and head
is tested at three budgets per task, checkpoints of one run under a constant rate. Every block here
is named in docs/experiments.md or README.md (``<!-- results:budget... -->``) and re-rendered by
``clipmag-report docs`` (:mod:`clipmag_experiments.report.docs_sync`), so a re-run or a withdrawn
cell changes the manuals' numbers, never leaves them stale. Groups that have not run yet are left
out of a table, which says so in its last line.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from clipmag.results.significance import with_family_holm
from clipmag_experiments.report.curves import pairs_seen
from clipmag_experiments.report.docs_positive import (
    DATASETS,
    STARTS,
    head_cell,
    lr_grid_table,
    order,
    p_and_t,
    scale_grid_table,
)
from clipmag_experiments.report.starts import StartRow
from clipmag_experiments.report.stored import StoredResults, StoredSweep

__all__ = ["BLOCKS", "VALUES", "SWEEP", "BUDGETS"]

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


def _rows(sweep: StoredSweep) -> list[tuple[StartRow, int]]:
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


def family_size(stored: StoredResults, argument: str = "") -> str:
    """How many tests the budget table's whole-table Holm corrects over."""
    rows = _rows(stored.sweep(SWEEP))
    return str(sum(1 for r, _ in rows for h in HEADS[1:] if h in r.heads and r.heads[h].comparison is not None))


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
    for row, pairs in _rows(sweep):
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
    for row, _ in _rows(sweep):
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


def time_table(stored: StoredResults) -> str:
    """What each group cost, measured: its cells' training and testing seconds (a continued cell
    counts only the steps it added), in minutes."""
    sweep = stored.sweep(SWEEP)
    lines = ["| group | cells | training | testing |", "|---" * 4 + "|"]
    total = np.zeros(2)
    known = ["lr-grid", "scale-grid", *(g for groups in BUDGETS.values() for g in groups)]
    for group in sorted({c.cell["group"] for c in sweep.cells}, key=lambda g: order(g, known)):
        cells = sweep.group(group)
        seconds = np.array([[c.results["timings"][k] for k in ("train_seconds", "test_seconds")] for c in cells])
        spent = seconds.sum(axis=0)
        total += spent
        lines.append(f"| `{group}` | {len(cells)} | {spent[0] / 60:.1f} min | {spent[1] / 60:.1f} min |")
    lines.append(f"| all | {len(sweep.cells)} | {total[0] / 60:.1f} min | {total[1] / 60:.1f} min |")
    return "\n".join(lines)


def runs(stored: StoredResults, argument: str = "") -> str:
    """How many runs the stored budget sweep holds, and the code that made them."""
    return stored.sweep(SWEEP).runs_at()


def hours(stored: StoredResults, argument: str = "") -> str:
    """The stored cells' training and testing time together, in hours (what the run cost so far)."""
    return f"{stored.sweep(SWEEP).cell_seconds() / 3600:.1f} hours"


BLOCKS: dict[str, Callable[[StoredResults], str]] = {
    "budget": budget_table,
    "budget-gap": gap_table,
    "budget-time": time_table,
    "budget-lr-grid": lambda stored: lr_grid_table(stored.sweep(SWEEP), SELECTION_GROUP),
    "budget-scale-grid": lambda stored: scale_grid_table(stored.sweep(SWEEP), SELECTION_GROUP),
}
VALUES: dict[str, Callable[[StoredResults, str], str]] = {
    "budget-runs": runs,
    "budget-hours": hours,
    "budget-family": family_size,
}
