"""Resolve a sweep cell whose variant is chosen from an earlier group's results
(:class:`~clipmag_experiments.design.grid.VariantChoice`), e.g. each head's loss scale picked on a dev split.

The choice is made when the cell is about to run, from the finished cells of the selection group
with the same model and head, and written into the cell's ``cell.json`` (variant, metric, dataset
and every candidate's mean score), so the report and a reader can see what was chosen and why. A
grid lists its variants in order (scales from small to large), so a choice of its first or last
variant may have an optimum beyond it: ``at_grid_edge`` in ``cell.json`` says so, and a warning line
names the cell and the grid to widen.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

import numpy as np

from clipmag.results.record import RESULTS_FILE, read_results
from clipmag_experiments.design.grid import Cell

__all__ = ["choose_variant"]

logger = logging.getLogger("clipmag")


def _score(candidate: Cell, metric: str, dataset: str | None) -> float:
    path = candidate.directory / RESULTS_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"sweep cell {candidate.label} has no {RESULTS_FILE}: choosing a variant needs its group finished first"
        )
    metrics = read_results(path)["metrics"]
    if dataset is None:
        if len(metrics) != 1:
            raise ValueError(f"{path}: {len(metrics)} test sets ({', '.join(metrics)}); name one in choose_variant")
        dataset = next(iter(metrics))
    value = (metrics.get(dataset) or {}).get(metric)
    if not isinstance(value, (int, float)):
        raise ValueError(f"{path}: no {metric!r} for test set {dataset!r} to choose a variant by")
    return float(value)


def choose_variant(cell: Cell, cells: Sequence[Cell]) -> Cell:
    """``cell`` with the arguments of its best candidate variant in place (unchanged without a choice).

    The chosen arguments go before the cell's own variant's, so a group may both choose (a learning
    rate, from another group) and list variants (the scales of a grid). A candidate that chose its
    own arguments in turn is resolved first, so a choice carries everything its candidate ran with
    (the learning rate a scale grid took, with the scale)."""
    choice = cell.choice
    if choice is None:
        return cell
    head = choice.head or cell.head
    candidates = [c for c in cells if c.group == choice.group and c.model == cell.model and c.head == head]
    if not candidates:
        raise ValueError(
            f"sweep cell {cell.label}: group {choice.group!r} has no cells for model {cell.model}, head {head}"
        )
    variants = list(dict.fromkeys(c.variant for c in candidates))
    scores = {
        str(v): float(np.mean([_score(c, choice.metric, choice.dataset) for c in candidates if c.variant == v]))
        for v in variants
    }
    best = max(variants, key=lambda v: (scores[str(v)], -variants.index(v)))  # a tie goes to the first listed
    args = choose_variant(next(c for c in candidates if c.variant == best), cells).variant_args
    chosen = {"from": choice.group, "variant": best, "by": choice.metric, "dataset": choice.dataset}
    at_edge = len(variants) > 1 and variants.index(best) in (0, len(variants) - 1)
    chosen |= {"head": head, "args": list(args), "scores": scores, "at_grid_edge": at_edge}
    if at_edge:
        logger.warning(
            "sweep cell %s: variant %s of group %r is at the edge of its grid (%s); the best setting may lie "
            "beyond it: widen the grid",
            cell.label,
            best,
            choice.group,
            ", ".join(map(str, variants)),
        )
    argv = [*cell.argv[: cell.variant_at], *args, *cell.argv[cell.variant_at :]]
    return dataclasses.replace(cell, argv=argv, variant_args=[*args, *cell.variant_args], chosen=chosen)
