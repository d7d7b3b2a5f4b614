"""The CLIP sweep's table of docs/clip.md (``results/clip_losses``), rendered from its cells.

``configs/sweeps/clip_losses.yaml`` trains the four fixed heads under InfoNCE in both directions,
in one direction, SigLIP and a locked image tower (LiT). The block ``clip-losses`` is the report's
CLIP table of those cells - I->T and T->I recall with the model's head and with cosine, zero-shot
accuracy both ways, each head against cosine of its group with the query-level test (Holm over
the row's heads) and the seed t-test - so the page shows what the stored cells give, nothing typed.
"""

from __future__ import annotations

from collections.abc import Callable

from clipmag.results.significance import family_mark
from clipmag.results.significance import verdict as verdict_of
from clipmag_experiments.report.collect import CLIP_METRICS, caption_clusters, query_outcomes, tidy_rows
from clipmag_experiments.report.stored import StoredResults
from clipmag_experiments.report.tables import (
    Cell,
    TableRow,
    aggregate,
    tested,
    to_markdown,
    with_query_tests,
    with_table_holm,
)

__all__ = ["BLOCKS", "VALUES"]

SWEEP = "clip_losses"
MAGNITUDE_HEADS = ("dot", "qnorm", "dnorm")


def tested_table(stored: StoredResults) -> list[TableRow]:
    """Every group's CLIP metrics per head with the query-level tests (text -> image with the image
    as the unit) and Holm over the whole table; computed once per store (the tests take seconds)."""
    sweep = stored.sweep(SWEEP)

    def compute() -> list[TableRow]:
        cells = sweep.cells
        rows = aggregate(tidy_rows(cells), CLIP_METRICS)
        return with_table_holm(with_query_tests(rows, query_outcomes(cells), caption_clusters(cells)))

    return sweep.derived("tested-table", compute)


def clip_table(stored: StoredResults) -> str:
    """Every group's CLIP metrics per head, as the sweep report tabulates them."""
    return to_markdown(tested_table(stored)).rstrip("\n")


def _cell(stored: StoredResults, argument: str, value: str) -> Cell:
    """``GROUP/METRIC/HEAD``: one cell of the CLIP table (the digits test set)."""
    parts = argument.split("/")
    if len(parts) != 3:
        raise ValueError(f"value {value}: expected GROUP/METRIC/HEAD, got {argument!r}")
    group, metric, head = parts
    for row in tested_table(stored):
        if (row.group, row.metric) == (group, metric) and head in row.cells:
            return row.cells[head]
    raise ValueError(f"{SWEEP}: no {head} cell of {metric} in group {group!r}")


def verdict(stored: StoredResults, argument: str) -> str:
    """``GROUP/METRIC/HEAD``: ``above`` / ``below`` / ``level`` - the row's mark against cosine."""
    return verdict_of(_cell(stored, argument, "clip-verdict").comparison)


def verdicts(stored: StoredResults, argument: str) -> str:
    """``GROUP/METRIC``: every magnitude head's mark against cosine, in words (``dot below, qnorm
    below, dnorm level``)."""
    return ", ".join(f"{head} {verdict(stored, f'{argument}/{head}')}" for head in MAGNITUDE_HEADS)


def mean(stored: StoredResults, argument: str) -> str:
    """``GROUP/METRIC/HEAD``: the metric x100, mean over seeds."""
    return f"{100 * _cell(stored, argument, 'clip-mean').mean:.2f}"


def difference(stored: StoredResults, argument: str) -> str:
    """``GROUP/METRIC/HEAD``: the mean per-query difference to cosine, x100."""
    comparison = _cell(stored, argument, "clip-difference").comparison
    if comparison is None:
        raise ValueError(f"{SWEEP}: {argument} has no query-level test against cosine")
    return f"{100 * comparison.difference:+.2f}"


def survivors(stored: StoredResults, argument: str = "") -> str:
    """``40 of 96``: the table's marks that survive Holm over all of its tests (†)."""
    table = tested_table(stored)
    found = sum(1 for row in table for cell in row.cells.values() if family_mark(cell.comparison))
    return f"{found} of {tested(table)}"


def tests(stored: StoredResults, argument: str = "") -> str:
    """How many query-level tests the CLIP table holds: the family of its whole-table Holm."""
    return str(tested(tested_table(stored)))


def runs(stored: StoredResults, argument: str = "") -> str:
    """How many runs the stored CLIP sweep holds, and the code that made them."""
    return stored.sweep(SWEEP).runs_at()


def minutes(stored: StoredResults, argument: str = "") -> str:
    """The stored cells' training and testing time together, in minutes (what the sweep cost)."""
    return f"{stored.sweep(SWEEP).cell_seconds() / 60:.0f} minutes"


BLOCKS: dict[str, Callable[[StoredResults], str]] = {"clip-losses": clip_table}
VALUES: dict[str, Callable[[StoredResults, str], str]] = {
    "clip-runs": runs,
    "clip-minutes": minutes,
    "clip-verdict": verdict,
    "clip-verdicts": verdicts,
    "clip-mean": mean,
    "clip-difference": difference,
    "clip-survivors": survivors,
    "clip-tests": tests,
}
