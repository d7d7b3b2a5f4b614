"""The fair fight's tables and words in the manuals (``results/fair_fight``), rendered from its cells.

``configs/sweeps/fair_fight.yaml`` asks whether qnorm and dnorm beat cosine when every head gets the
same selection on dev (its learning rate, then its loss scale, each grid widened past an edge),
every run is tested at its best dev checkpoint and no training pair is seen twice. Its compared
groups are two code-search budgets (2,560 and 25,600 distinct pairs), the largest again with a
learned temperature, and SciFact as the repeated-data contrast. Everything here reads the stored
cells, so a sentence of the docs cannot say more than the table:

- ``fair-fight``: nDCG@10 per head against cosine of the same group, start and test set, with the
  row's Holm, the whole table's (``p_all``, † on a mark that survives it) and the seed t-test;
- ``fair-fight-choices``: each head's dev-chosen rate and scale, the grid read and whether a choice
  stayed on an edge;
- ``fair-fight-curves``: the dev curve (nDCG@10 on the dev split at every evaluated step of the
  largest budget) and the test score at each code-search budget, per head;
- the values ``ff-*`` of the prose: a head "above", "below" or "level with" cosine on a test set, a
  group's tally under Holm over the whole table, how many choices stayed on a grid edge, what the
  sweep cost, so a sentence that no longer matches the table is stale for the drift check. The
  argument names the row: ``ff-verdict:code-search-25600/pypi-test/splade/dnorm``.

Groups that have not run yet are left out of a table, which says so in its last line.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

import numpy as np

from clipmag.results.marks import family_mark, family_tally, p_text
from clipmag.results.marks import verdict as verdict_of
from clipmag.results.significance import Comparison, compare_with_baseline, with_family_holm
from clipmag_experiments.manuals.positive_regime import DATASETS, head_cell, order, p_and_t
from clipmag_experiments.report.collect import CellResult
from clipmag_experiments.report.curves import pairs_seen
from clipmag_experiments.report.starts import HeadResult, StartRow
from clipmag_experiments.report.stored import StoredResults, StoredSweep, runs_value, time_value

__all__ = ["BLOCKS", "VALUES", "SWEEP", "GROUPS", "HEADS", "choices", "compared", "table_rows"]

SWEEP = "fair_fight"
STARTS = ("splade", "minilm-dot")
HEADS = ("cosine", "qnorm", "dnorm")
# the protocol's compared groups (comparison.groups), in the order the tables show them
GROUPS = ("code-search-2560", "code-search-25600", "code-search-25600-learned", "scifact-2560")
CODE_BUDGETS = ("code-search-2560", "code-search-25600")  # the test curve: one run per budget
LARGEST = "code-search-25600"  # the dev curves: every evaluated step of the largest budget
LEARNED = "code-search-25600-learned"  # the largest budget again, its loss scale trained
TEST_SETS = {**DATASETS, "pypi-test": "PyPI test packages (held out)"}
# the test sets as a sentence names them
SHORT = {
    "pypi-test": "PyPI test",
    "stdlib": "stdlib",
    "sklearn": "scikit-learn",
    "scifact": "SciFact",
    "cranfield": "Cranfield",
}


def _finished(sweep: StoredSweep) -> list[str]:
    groups = {c.cell["group"] for c in sweep.cells}
    return [g for g in GROUPS if g in groups]


def compared(rows: list[StartRow]) -> list[HeadResult]:
    """The heads of ``rows`` tested against cosine, row by row: the family of the whole table's Holm."""
    return [r.heads[h] for r in rows for h in HEADS[1:] if h in r.heads and r.heads[h].comparison is not None]


def table_rows(sweep: StoredSweep) -> list[StartRow]:
    """The compared rows, by test set, start and group, each comparison with its Holm over the whole
    table (``p_family``): the family a sentence about the table rests on."""

    def compute() -> list[StartRow]:
        groups = _finished(sweep)
        rows = [r for r in sweep.start_rows if r.group in groups]
        rows.sort(key=lambda r: (order(r.dataset, list(TEST_SETS)), order(r.start, STARTS), groups.index(r.group)))
        tested = compared(rows)
        for head, comparison in zip(tested, with_family_holm([h.comparison for h in tested])):
            head.comparison = comparison
        return rows

    return sweep.derived("fair-fight-rows", compute)


def _unfinished_note(sweep: StoredSweep) -> list[str]:
    missing = [g for g in GROUPS if g not in _finished(sweep)]
    return [f"\n_Not run yet: {', '.join(f'`{g}`' for g in missing)}._"] if missing else []


def _pairs(sweep: StoredSweep, row: StartRow) -> str:
    seen = sorted({pairs_seen(c) for c in sweep.group(row.group) if c.cell["model"] == row.start})
    return " / ".join(f"{p:,}" for p in seen)


def fight_table(stored: StoredResults) -> str:
    """nDCG@10 x100 per head (seed mean ± std, the dev-chosen scale as a subscript) against cosine."""
    sweep = stored.sweep(SWEEP)
    lines = ["| test set | start | group | pairs seen | " + " | ".join(HEADS) + " |", "|---" * (len(HEADS) + 4) + "|"]
    for row in table_rows(sweep):
        cells = " | ".join(head_cell(row, h, spread=True, tests=p_and_t) for h in HEADS)
        label = TEST_SETS.get(row.dataset, row.dataset)
        lines.append(f"| {label} | {row.start} | `{row.group}` | {_pairs(sweep, row)} | {cells} |")
    return "\n".join(lines + _unfinished_note(sweep))


def _chosen(cell: CellResult) -> dict:
    chosen = cell.cell.get("chosen")
    if not chosen:
        raise ValueError(f"{cell.directory}: no dev choice recorded in cell.json (choose_variant)")
    return chosen


def _setting(variant: str) -> float:
    """A grid variant's value (``lr6e-5`` -> 6e-5, ``scale20`` -> 20)."""
    return float(variant.removeprefix("lr").removeprefix("scale"))


def _selection_cell(sweep: StoredSweep, group: str, start: str, head: str, variant: str) -> CellResult:
    for c in sweep.cells:
        place = (c.cell["group"], c.cell["model"], c.cell.get("head"), str(c.cell.get("variant")), c.cell["seed"])
        if place == (group, start, head, variant, 0):
            return c
    raise ValueError(f"{sweep.folder}: no seed-0 cell {group}/{start}/{head}-{variant}")


def _grid_read(sweep: StoredSweep, group: str, start: str, head: str) -> list[str]:
    """The variants of a selection grid that ran for one start and head (its walk's extensions
    included), low to high: what the choice read, from the stored cells themselves."""
    ran = {
        str(c.cell["variant"])
        for c in sweep.cells
        if (c.cell["group"], c.cell["model"], c.cell.get("head"), c.cell["seed"]) == (group, start, head, 0)
    }
    return sorted(ran, key=_setting)


def _choice(sweep: StoredSweep, group: str, start: str, head: str, variant: str) -> dict[str, str | bool]:
    grid = _grid_read(sweep, group, start, head)
    if variant not in grid:
        raise ValueError(f"{sweep.folder}: the chosen {variant} of {start}/{head} has no stored cell in {group!r}")
    shown = [g.removeprefix("lr").removeprefix("scale") for g in grid]
    return {"value": shown[grid.index(variant)], "grid": ", ".join(shown), "edge": variant in (grid[0], grid[-1])}


def choices(sweep: StoredSweep) -> dict[tuple[str, str], dict[str, dict[str, str | bool]]]:
    """(start, head) -> its dev-chosen ``rate`` and ``scale``: each value, the grid read and whether
    the choice is on that grid's edge. The scale is the compared cells' choice; the rate is the one the
    chosen scale-grid cell ran with; each grid as read is the selection cells that ran, so a grid an
    amendment widened after a choice was recorded is read as it stands."""
    found = {}
    for c in sweep.cells:
        if c.cell["group"] != LARGEST or c.cell["seed"] != 0:
            continue
        start, head = c.cell["model"], c.cell["head"]
        scale = _chosen(c)
        rate = _chosen(_selection_cell(sweep, scale["from"], start, head, scale["variant"]))
        found[(start, head)] = {
            "rate": _choice(sweep, rate["from"], start, head, str(rate["variant"])),
            "scale": _choice(sweep, scale["from"], start, head, str(scale["variant"])),
        }
    return found


def choices_table(stored: StoredResults) -> str:
    """Each head's dev-chosen rate and scale per start, with the grids read (edge: still on one)."""
    found = choices(stored.sweep(SWEEP))
    if not found:
        return f"_Not run yet: `{LARGEST}`._"
    learned = learned_scales(stored.sweep(SWEEP))
    extra = " learned scale tested (from the chosen scale) |" if learned else ""
    lines = ["| start | head | learning rate (grid read) | loss scale (grid read) |" + extra]
    lines.append("|---" * (5 if learned else 4) + "|")
    for (start, head), c in sorted(found.items(), key=lambda i: (order(i[0][0], STARTS), order(i[0][1], HEADS))):
        cells = [f"{x['value']} ({x['grid']})" + (" **edge**" if x["edge"] else "") for x in (c["rate"], c["scale"])]
        if learned:
            cells.append(f"{learned[(start, head)]:.1f}" if (start, head) in learned else "-")
        lines.append(f"| {start} | {head} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def learned_scales(sweep: StoredSweep) -> dict[tuple[str, str], float]:
    """(start, head) -> the loss scale of the learned arm's tested checkpoints (its head record), mean
    over seeds: where the trainable temperature went from the dev-chosen one it started at."""
    scales: dict[tuple[str, str], list[float]] = defaultdict(list)
    for c in sweep.cells:
        if c.cell["group"] == LEARNED and c.results["head"].get("scale") is not None:
            scales[(c.cell["model"], c.cell["head"])].append(float(c.results["head"]["scale"]))
    return {key: float(np.mean(values)) for key, values in scales.items()}


def dev_curves(sweep: StoredSweep) -> dict[tuple[str, str], dict[int, float]]:
    """(start, head) -> step -> dev nDCG@10 x100, mean over seeds, of the largest budget's runs."""
    curves: dict[tuple[str, str], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for c in sweep.cells:
        if c.cell["group"] != LARGEST:
            continue
        for point in (c.results.get("checkpoint") or {}).get("dev_curve") or []:
            value = next(v for k, v in point.items() if k != "step")
            curves[(c.cell["model"], c.cell["head"])][int(point["step"])].append(100 * float(value))
    return {key: {step: float(np.mean(v)) for step, v in sorted(by.items())} for key, by in curves.items()}


def _test_means(sweep: StoredSweep) -> dict[tuple[str, str, str], dict[str, float]]:
    """(start, test set, head) -> code-search budget group -> test nDCG@10 x100, mean over seeds."""
    means: dict[tuple[str, str, str], dict[str, float]] = defaultdict(dict)
    for row in table_rows(sweep):
        if row.group in CODE_BUDGETS:
            for head, result in row.heads.items():
                means[(row.start, row.dataset, head)][row.group] = 100 * result.mean
    return means


def curves_table(stored: StoredResults) -> str:
    """The learning curves per head: dev nDCG@10 at every evaluated step of the largest budget (x100,
    mean over seeds), then test nDCG@10 at each code-search budget."""
    sweep = stored.sweep(SWEEP)
    dev = dev_curves(sweep)
    if not dev:
        return f"_Not run yet: `{LARGEST}`._"
    steps = sorted({s for curve in dev.values() for s in curve})
    lines = ["| start | head | " + " | ".join(f"dev, step {s}" for s in steps) + " |", "|---" * (len(steps) + 2) + "|"]
    for (start, head), curve in sorted(dev.items(), key=lambda i: (order(i[0][0], STARTS), order(i[0][1], HEADS))):
        lines.append(
            f"| {start} | {head} | " + " | ".join(f"{curve[s]:.2f}" if s in curve else "-" for s in steps) + " |"
        )
    lines += ["", "| start | test set | head | " + " | ".join(f"`{g}`" for g in CODE_BUDGETS) + " |"]
    lines.append("|---" * (len(CODE_BUDGETS) + 3) + "|")
    for (start, dataset, head), by_group in _test_means(sweep).items():
        values = " | ".join(f"{by_group[g]:.2f}" if g in by_group else "-" for g in CODE_BUDGETS)
        lines.append(f"| {start} | {TEST_SETS.get(dataset, dataset)} | {head} | {values} |")
    return "\n".join(lines)


def _head(stored: StoredResults, argument: str, value: str) -> HeadResult:
    """``GROUP/DATASET/START/HEAD``: one head's result in the table."""
    parts = argument.split("/")
    if len(parts) != 4:
        raise ValueError(f"value {value}: expected GROUP/DATASET/START/HEAD, got {argument!r}")
    group, dataset, start, head = parts
    for row in table_rows(stored.sweep(SWEEP)):
        if (row.group, row.dataset, row.start) == (group, dataset, start) and head in row.heads:
            return row.heads[head]
    raise ValueError(f"{SWEEP}: no {head} of {start} on {dataset} in group {group!r}")


def _comparison(stored: StoredResults, argument: str, value: str) -> Comparison:
    comparison = _head(stored, argument, value).comparison
    if comparison is None:
        raise ValueError(f"value {value}: {argument} has no test against cosine")
    return comparison


def verdict(stored: StoredResults, argument: str) -> str:
    """``GROUP/DATASET/START/HEAD``: ``above`` / ``below`` / ``level``, with ``†`` where the mark
    survives Holm over the whole table."""
    comparison = _comparison(stored, argument, "ff-verdict")
    return verdict_of(comparison) + family_mark(comparison)


def difference(stored: StoredResults, argument: str) -> str:
    """``GROUP/DATASET/START/HEAD``: the mean per-query difference to cosine x100 with its 95% interval."""
    c = _comparison(stored, argument, "ff-difference")
    return f"{100 * c.difference:+.2f} [{100 * c.ci_low:+.2f}, {100 * c.ci_high:+.2f}]"


def verdicts(stored: StoredResults, argument: str) -> str:
    """``GROUP/START/HEAD``: the head's verdict on every test set of the group, in the table's order
    (``above† on PyPI test, level on stdlib, below on scikit-learn``)."""
    parts = argument.split("/")
    if len(parts) != 3:
        raise ValueError(f"value ff-verdicts: expected GROUP/START/HEAD, got {argument!r}")
    group, start, head = parts
    tested = [
        (r.dataset, r.heads[head].comparison)
        for r in table_rows(stored.sweep(SWEEP))
        if (r.group, r.start) == (group, start) and head in r.heads and r.heads[head].comparison is not None
    ]
    found = [f"{verdict_of(c)}{family_mark(c)} on {SHORT.get(dataset, dataset)}" for dataset, c in tested]
    if not found:
        raise ValueError(f"{SWEEP}: no tested {head} of {start} in group {group!r}")
    return ", ".join(found)


def mean(stored: StoredResults, argument: str) -> str:
    """``GROUP/DATASET/START/HEAD``: the head's nDCG@10 x100, mean over seeds."""
    return f"{100 * _head(stored, argument, 'ff-mean').mean:.2f}"


def rate(stored: StoredResults, argument: str) -> str:
    """``START/HEAD``: the learning rate the dev set chose for the head (``6e-4``)."""
    start, _, head = argument.partition("/")
    found = choices(stored.sweep(SWEEP))
    if (start, head) not in found:
        raise ValueError(f"{SWEEP}: no dev choice for {head} of {start}; expected START/HEAD, got {argument!r}")
    return str(found[(start, head)]["rate"]["value"])


def marked(stored: StoredResults, argument: str) -> str:
    """``above`` / ``below``: every comparison whose mark survives Holm over the whole table;
    ``above-row`` / ``below-row``: every ▲ / ▼ under Holm within its row, survivor or not
    (``splade's dnorm on Cranfield in scifact-2560``, or ``none``)."""
    direction, _, level = argument.partition("-")
    if direction not in ("above", "below") or level not in ("", "row"):
        raise ValueError(f"value ff-marked: expected above, below, above-row or below-row, got {argument!r}")
    found = []
    for row in table_rows(stored.sweep(SWEEP)):
        for head in HEADS[1:]:
            c = row.heads[head].comparison if head in row.heads else None
            if c is not None and verdict_of(c) == direction and (level or family_mark(c)):
                found.append(f"{row.start}'s {head} on {SHORT.get(row.dataset, row.dataset)} in {row.group}")
    return "; ".join(found) or "none"


def tally(stored: StoredResults, argument: str = "") -> str:
    """``GROUP``, or nothing for the whole table: how its comparisons came out under Holm over the
    whole table, with the smallest and largest MDE of those it did not separate from cosine
    (``2 above†, 1 below† and 9 not separated (MDE 1.20-3.40), of 12``)."""
    rows = [r for r in table_rows(stored.sweep(SWEEP)) if r.group == argument or not argument]
    tested = [h.comparison for h in compared(rows)]
    if not tested:
        where = f"group {argument!r}" if argument else "the table"
        raise ValueError(f"{SWEEP}: {where} has no comparison against cosine")
    return family_tally(tested)


# the untrained SPLADE scored on SciFact and Cranfield at the fair fight's SciFact lengths (queries 64)
START_SWEEP, START_GROUP = "positive_regime", "scifact-untuned"
# at step 0 qnorm ranks exactly as dot and dnorm as cosine (a query's own norm orders nothing)
RANKS_AS = {"cosine": "cosine", "dot": "dot", "qnorm": "dot", "dnorm": "cosine"}


def from_start(stored: StoredResults, argument: str) -> str:
    """``DATASET/HEAD``: SPLADE's change from its untrained start after SciFact's repeated pairs
    (``scifact-2560``), x100 with its interval and p: whether a mark against cosine is the head
    rising or cosine falling (``-4.60 [-6.63, -2.67], p<0.001``)."""
    dataset, _, head = argument.partition("/")
    trained = _head(stored, f"scifact-2560/{dataset}/splade/{head}", "ff-from-start")
    untrained = [
        c
        for c in stored.sweep(START_SWEEP).group(START_GROUP)
        if c.cell["model"] == "splade" and c.head == RANKS_AS.get(head)
    ]
    if len(untrained) != 1 or dataset not in untrained[0].results["metrics"]:
        twin = RANKS_AS.get(head)
        raise ValueError(f"value ff-from-start: no untrained splade {twin} on {dataset!r} in {START_GROUP}")
    start = {q: float(v["NDCG@10"]) for q, v in untrained[0].results["metrics"][dataset]["per_query"].items()}
    systems = {"start": dict.fromkeys(trained.per_query, start), head: trained.per_query}
    c = compare_with_baseline(systems, "start")[head]
    return f"{100 * c.difference:+.2f} [{100 * c.ci_low:+.2f}, {100 * c.ci_high:+.2f}], {p_text(c.p)}"


def survivors(stored: StoredResults, argument: str = "") -> str:
    """``3 of 40``: the table's marks that survive Holm over all of its tests (†), and how many tests."""
    rows = table_rows(stored.sweep(SWEEP))
    tested = [h.comparison for h in compared(rows)]
    return f"{sum(1 for c in tested if family_mark(c))} of {len(tested)}"


def edges(stored: StoredResults, argument: str = "") -> str:
    """``0 of 12``: the dev choices (rate and scale, per start and head) that stayed on a grid edge."""
    found = choices(stored.sweep(SWEEP))
    stuck = sum(int(c["rate"]["edge"]) + int(c["scale"]["edge"]) for c in found.values())
    return f"{stuck} of {2 * len(found)}"


BLOCKS: dict[str, Callable[[StoredResults], str]] = {
    "fair-fight": fight_table,
    "fair-fight-choices": choices_table,
    "fair-fight-curves": curves_table,
}
VALUES: dict[str, Callable[[StoredResults, str], str]] = {
    "ff-verdict": verdict,
    "ff-difference": difference,
    "ff-verdicts": verdicts,
    "ff-mean": mean,
    "ff-rate": rate,
    "ff-marked": marked,
    "ff-tally": tally,
    "ff-from-start": from_start,
    "ff-survivors": survivors,
    "ff-edges": edges,
    "ff-runs": runs_value(SWEEP),
    "ff-hours": time_value(SWEEP, "hours"),
}
