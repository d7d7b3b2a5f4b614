"""The README's findings figure: every comparison behind the findings table, each head against cosine
with its 95% interval, one panel per question, one line per start, test set and group.

The table gives each question's tally; the figure shows what the tally counts, so a reader sees at
a glance whether "not separated" means a tight interval around zero or a wide one. It is drawn from
the very comparisons the table counts (:data:`~clipmag_experiments.manuals.findings.QUESTIONS`,
each under its whole table's Holm), so the two cannot disagree.

A figure is a file, not text a drift check can compare, so the block that shows it in the README
carries a digest of the plotted values, and the PNG carries the same digest in its metadata: the
check (``clipmag-report docs --check``) finds the block stale when the results give other values,
and the figure stale when its digest is not the block's; ``clipmag-report docs`` redraws it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from clipmag.results.marks import family_verdict
from clipmag_experiments.manuals.findings import QUESTIONS, Labelled, Question, compared
from clipmag_experiments.report.stored import StoredResults

__all__ = ["BLOCKS", "FIGURE", "FIGURES", "digest", "draw", "figure_stale", "plotted"]

FIGURE = Path("docs/figures/findings.png")  # from the project root, where the README links it
DESCRIPTION = "clipmag findings"  # the PNG metadata key's value starts so, then the digest
MARKERS = {"dot": "s", "qnorm": "o", "dnorm": "^", "learnable": "D"}
COLOURS = {"dot": "tab:blue", "qnorm": "tab:orange", "dnorm": "tab:green", "learnable": "tab:purple"}


def plotted(stored: StoredResults) -> list[tuple[Question, list[Labelled]]]:
    """Each answered question with its comparisons, as the findings table counts them."""
    return [(q, compared(q, stored)) for q in QUESTIONS if q.pending is None or q.pending.answered(stored)]


def digest(stored: StoredResults) -> str:
    """A short sha256 of every plotted value (x100, two decimals, as the tables print them) and
    verdict: what the README block and the PNG metadata both carry."""

    def compute() -> str:
        values = [
            [q.sweep, c.label, c.head, *(f"{100 * x:.2f}" for x in _interval(c)), family_verdict(c.comparison)]
            for q, labelled in plotted(stored)
            for c in labelled
        ]
        return hashlib.sha256(json.dumps(values).encode()).hexdigest()[:16]

    return stored.rendering(("findings-figure", "digest"), compute)


def _interval(c: Labelled) -> tuple[float, float, float]:
    return c.comparison.difference, c.comparison.ci_low, c.comparison.ci_high


def _panel(ax, question: Question, labelled: list[Labelled]) -> None:
    lines = list(dict.fromkeys(c.label for c in labelled))
    heads = list(dict.fromkeys(c.head for c in labelled))
    offsets = {h: (i - (len(heads) - 1) / 2) * 0.22 for i, h in enumerate(heads)}
    margin = next((c.comparison.margin for c in labelled if c.comparison.margin is not None), None)
    if margin is not None:
        ax.axvspan(-100 * margin, 100 * margin, color="0.9", zorder=0, label=f"±{100 * margin:g} (equivalence)")
    ax.axvline(0.0, color="0.4", lw=0.8, zorder=1)
    for head in heads:
        mine = [c for c in labelled if c.head == head]
        y = np.array([lines.index(c.label) + offsets[head] for c in mine])
        x = np.array([100 * c.comparison.difference for c in mine])
        # a percentile interval may sit a rounding error off its mean: an error bar is never negative
        low = np.maximum(0.0, x - np.array([100 * c.comparison.ci_low for c in mine]))
        high = np.maximum(0.0, np.array([100 * c.comparison.ci_high for c in mine]) - x)
        decided = np.array([c.comparison.family_significant or c.comparison.family_equivalent for c in mine])
        colour = COLOURS.get(head, "0.3")
        ax.errorbar(x, y, xerr=[low, high], fmt="none", ecolor=colour, elinewidth=0.9, zorder=2)
        ax.scatter(x[decided], y[decided], marker=MARKERS.get(head, "o"), color=colour, s=22, zorder=3, label=head)
        ax.scatter(
            x[~decided], y[~decided], marker=MARKERS.get(head, "o"), facecolor="white", edgecolor=colour, s=22, zorder=3
        )
    ax.set_yticks(range(len(lines)), lines, fontsize=6)
    ax.set_ylim(len(lines) - 0.5, -0.5)
    ax.set_title(question.asked, fontsize=8, loc="left")
    ax.tick_params(axis="x", labelsize=7)
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)  # beside, never over


def draw(stored: StoredResults, root: Path = Path(".")) -> Path:
    """The figure under ``root`` (PNG, the digest in its ``Description``): one panel per question."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = plotted(stored)
    heights = [max(3, len({c.label for c in labelled})) for _, labelled in panels]
    fig, axes = plt.subplots(
        len(panels), 1, figsize=(7.5, 0.16 * sum(heights) + 0.9 * len(panels)), height_ratios=heights, squeeze=False
    )
    for ax, (question, labelled) in zip(axes[:, 0], panels):
        _panel(ax, question, labelled)
    axes[-1, 0].set_xlabel(
        "head - cosine, nDCG@10 x100 (95% interval); filled: above, below or equivalent under the table's Holm",
        fontsize=7,
    )
    fig.tight_layout()
    path = root / FIGURE
    path.parent.mkdir(parents=True, exist_ok=True)
    metadata = {"Description": f"{DESCRIPTION} {digest(stored)}", "Software": None}
    fig.savefig(path, dpi=110, bbox_inches="tight", metadata=metadata)
    plt.close(fig)
    return path


def figure_stale(stored: StoredResults, root: Path = Path(".")) -> str | None:
    """Why the figure under ``root`` is not what the results give (None: it is)."""
    from PIL import Image

    path = root / FIGURE
    if not path.is_file():
        return f"{path}: missing; draw it with clipmag-report docs"
    with Image.open(path) as image:
        found = image.info.get("Description", "")
    expected = f"{DESCRIPTION} {digest(stored)}"
    return None if found == expected else f"{path}: drawn from other values ({found!r}, the results give {expected!r})"


def figure_block(stored: StoredResults) -> str:
    """The README's link to the figure, with the digest of the values it must show."""
    return (
        f"![Each head against cosine, with its 95% interval, per question, start and test set]({FIGURE})\n"
        f"<!-- figure data {digest(stored)} -->"
    )


BLOCKS: dict[str, Callable[[StoredResults], str]] = {"findings-figure": figure_block}
# a block that shows a figure file: how to draw it under a root, and why the one there is stale
FIGURES: dict[str, tuple[Callable[[StoredResults, Path], Path], Callable[[StoredResults, Path], str | None]]] = {
    "findings-figure": (draw, figure_stale)
}
