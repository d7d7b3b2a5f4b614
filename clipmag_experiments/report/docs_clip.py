"""The CLIP sweep's table of docs/clip.md (``results/clip_losses``), rendered from its cells.

``configs/sweeps/clip_losses.yaml`` trains the four fixed heads under InfoNCE in both directions,
in one direction, SigLIP and a locked image tower (LiT). The block ``clip-losses`` is the report's
CLIP table of those cells - I->T and T->I recall with the model's head and with cosine, zero-shot
accuracy both ways, each head against cosine of its group with the query-level test (Holm over
the row's heads) and the seed t-test - so the page shows what the stored cells give, nothing typed.
"""

from __future__ import annotations

from collections.abc import Callable

from clipmag_experiments.report.collect import CLIP_METRICS, caption_clusters, query_outcomes, tidy_rows
from clipmag_experiments.report.stored import StoredResults
from clipmag_experiments.report.tables import (
    TableRow,
    aggregate,
    tested,
    to_markdown,
    with_query_tests,
    with_table_holm,
)

__all__ = ["BLOCKS", "VALUES"]

SWEEP = "clip_losses"


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


def family_size(stored: StoredResults, argument: str = "") -> str:
    """How many tests the CLIP table's whole-table Holm corrects over."""
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
    "clip-family": family_size,
}
