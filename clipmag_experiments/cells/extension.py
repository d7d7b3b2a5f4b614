"""The walk of a selection grid that extends itself past an edge
(:class:`~clipmag_experiments.design.grid.GridExtension`).

A grid whose best setting is its first or last one has not bracketed the optimum: the choice could
be better outside it. So the grid is read from its own variants outward: while the best of the
variants run so far is the lowest (highest) and a ``low`` (``high``) extension is left, that
extension is needed next; once it has run, the choice is made again over the widened grid. The
sweep runs an extension cell only when the walk needs it, and the choice over the grid
(:mod:`clipmag_experiments.cells.choice`) takes the walk's end, recording the grid it read and the
extensions that ran. Ties go to the variant lower in the grid's order. A candidate whose run
diverged (``score`` gives None) has run and ranks below every candidate that trained: its setting is
never chosen, and the walk names it among ``diverged``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from clipmag_experiments.design.grid import Cell

__all__ = ["GridWalk", "walk_grid"]


@dataclass(frozen=True)
class GridWalk:
    """Where a grid's walk stands: the variants read, low to high, the mean scores of those that
    trained, the best of them, the extension variant needed before the choice stands (None: it
    stands), the extension variants that ran and the variants read whose runs diverged."""

    order: list[str]
    scores: dict[str, float]
    best: str
    needed: str | None
    extended: list[str]
    diverged: list[str]


def _edge(cells: Sequence[Cell], edge: str) -> list[str]:
    steps = sorted({(c.extends[1], str(c.variant)) for c in cells if c.extends and c.extends[0] == edge})
    return [variant for _, variant in steps]


def walk_grid(
    cells: Sequence[Cell],
    group: str,
    model: str | None,
    head: str | None,
    score: Callable[[Cell], float | None],
    finished: Callable[[Cell], bool],
) -> GridWalk:
    """Walk the grid of ``group`` for one model and head: ``score`` reads a finished cell's metric
    (None: its run diverged), ``finished`` says whether a cell has run to results or divergence."""
    mine = [c for c in cells if c.group == group and c.model == model and c.head == head]
    if not mine:
        raise ValueError(f"sweep group {group!r} has no cells for model {model}, head {head}")
    order = list(dict.fromkeys(str(c.variant) for c in mine if c.extends is None))
    low, high = _edge(mine, "low"), _edge(mine, "high")

    def mean(variant: str) -> float | None:
        """The seeds' mean; None when any seed diverged (the setting does not train reliably)."""
        values = [score(c) for c in mine if str(c.variant) == variant]
        return None if any(v is None for v in values) else float(np.mean(values))

    read = {v: mean(v) for v in order}
    extended: list[str] = []
    while True:
        scores = {v: x for v, x in read.items() if x is not None}
        diverged = [v for v in order if read[v] is None]
        best = max(order, key=lambda v: (read[v] is not None, scores.get(v, 0.0), -order.index(v)))
        taken_low, taken_high = (sum(v in extended for v in side) for side in (low, high))
        needed = None
        if best in diverged:  # every setting read diverged: no optimum to bracket, nothing to choose
            pass
        elif best == order[0] and taken_low < len(low):
            needed = low[taken_low]
        elif best == order[-1] and taken_high < len(high):
            needed = high[taken_high]
        if needed is None or not all(finished(c) for c in mine if str(c.variant) == needed):
            return GridWalk(order, scores, best, needed, extended, diverged)
        order = [needed, *order] if needed in low else [*order, needed]
        read[needed] = mean(needed)
        extended.append(needed)
