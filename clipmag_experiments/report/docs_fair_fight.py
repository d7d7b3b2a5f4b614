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
- the values ``ff-*`` of the prose are :mod:`clipmag_experiments.report.docs_fair_fight_values`.

Groups that have not run yet are left out of a table, which says so in its last line.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

import numpy as np

from clipmag.results.significance import with_family_holm
from clipmag_experiments.report.collect import CellResult
from clipmag_experiments.report.curves import pairs_seen
from clipmag_experiments.report.docs_positive import DATASETS, head_cell, order, p_and_t
from clipmag_experiments.report.starts import HeadResult, StartRow
from clipmag_experiments.report.stored import StoredResults, StoredSweep

__all__ = ["BLOCKS", "SWEEP", "GROUPS", "HEADS", "choices", "compared", "table_rows"]

SWEEP = "fair_fight"
STARTS = ("splade", "minilm-dot")
HEADS = ("cosine", "qnorm", "dnorm")
# the protocol's compared groups (comparison.groups), in the order the tables show them
GROUPS = ("code-search-2560", "code-search-25600", "code-search-25600-learned", "scifact-2560")
CODE_BUDGETS = ("code-search-2560", "code-search-25600")  # the test curve: one run per budget
LARGEST = "code-search-25600"  # the dev curves: every evaluated step of the largest budget
LEARNED = "code-search-25600-learned"  # the largest budget again, its loss scale trained
TEST_SETS = {**DATASETS, "pypi-test": "PyPI test packages (held out)"}


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


BLOCKS: dict[str, Callable[[StoredResults], str]] = {
    "fair-fight": fight_table,
    "fair-fight-choices": choices_table,
    "fair-fight-curves": curves_table,
}
