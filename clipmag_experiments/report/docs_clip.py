"""The CLIP sweep's table of docs/clip.md (``results/clip_losses``), rendered from its cells.

``configs/sweeps/clip_losses.yaml`` trains the four fixed heads under InfoNCE in both directions,
in one direction, SigLIP and a locked image tower (LiT). The block ``clip-losses`` is the report's
CLIP table of those cells - I->T and T->I recall with the model's head and with cosine, zero-shot
accuracy both ways, each head against cosine of its group with the query-level test (Holm over
the row's heads) and the seed t-test - so the page shows what the stored cells give, nothing typed.
"""

from __future__ import annotations

from collections.abc import Callable

from clipmag_experiments.report.collect import CLIP_METRICS, query_outcomes, tidy_rows
from clipmag_experiments.report.stored import StoredResults
from clipmag_experiments.report.tables import aggregate, to_markdown, with_query_tests

__all__ = ["BLOCKS", "VALUES"]

SWEEP = "clip_losses"


def clip_table(stored: StoredResults) -> str:
    """Every group's CLIP metrics per head, as the sweep report tabulates them."""
    cells = stored.sweep(SWEEP).cells
    table = with_query_tests(aggregate(tidy_rows(cells), CLIP_METRICS), query_outcomes(cells))
    return to_markdown(table).rstrip("\n")


def runs(stored: StoredResults, argument: str = "") -> str:
    """How many runs the stored CLIP sweep holds, and the code that made them."""
    return stored.sweep(SWEEP).runs_at()


def minutes(stored: StoredResults, argument: str = "") -> str:
    """The stored cells' training and testing time together, in minutes (what the sweep cost)."""
    return f"{stored.sweep(SWEEP).cell_seconds() / 60:.0f} minutes"


BLOCKS: dict[str, Callable[[StoredResults], str]] = {"clip-losses": clip_table}
VALUES: dict[str, Callable[[StoredResults, str], str]] = {"clip-runs": runs, "clip-minutes": minutes}
