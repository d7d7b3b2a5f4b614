"""Holm's correction over a family of resampled p-values, each resolved at the level it is judged at.

Why: a Monte Carlo p of 20,000 draws has an error of about 0.0015 at 0.05, but under Holm over a
table of 44 tests the first threshold is 0.05 / 44 = 0.0011, and a p near it is not known well
enough to say which side it is on: a mark drawn from it flips when the draws change (one such p
read 0.040 at 20,000 draws and 0.054 at 3 million). Here every p carries its error, and a test
whose mark is not decided by its estimate (the marks from ``p - z * error`` and ``p + z * error``
differ) gets ten times the draws, until the marks agree or the test's cap is reached (``MOST_DRAWS``
sign flips; the two-level bootstrap, whose replicates cost a draw per query, stops at
``MOST_REPLICATES``); a test left unresolved at the cap is reported as such, never marked.

Exact p-values (lattice outcomes, few units) have no error and are never refined.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from clipmag.results.randomisation import PValue

__all__ = ["MOST_DRAWS", "MOST_REPLICATES", "RESOLVE_Z", "Resolved", "holm", "resolved_holm"]

MOST_DRAWS = 2_000_000
MOST_REPLICATES = 200_000
RESOLVE_Z = 3.0  # a mark is decided when it is the same this many Monte Carlo errors either side


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of a family of p-values (same order)."""
    if not p_values:
        return []
    p = np.asarray(p_values, dtype=float)
    order = np.argsort(p, kind="stable")
    # the i-th smallest p times the number of hypotheses not yet rejected, never below an earlier one
    stepped = np.minimum(1.0, np.maximum.accumulate(p[order] * np.arange(p.size, 0, -1)))
    adjusted = np.empty_like(stepped)
    adjusted[order] = stepped
    return [float(x) for x in adjusted]


@dataclass(frozen=True)
class Resolved:
    """A family after resolution: each test's p as finally estimated, its Holm-adjusted p, and
    whether its mark at ``alpha`` is decided."""

    values: list[PValue]
    adjusted: list[float]
    decided: list[bool]


def _marks(p_values: Sequence[float], alpha: float) -> np.ndarray:
    return np.asarray(holm(p_values)) < alpha


def resolved_holm(
    values: Sequence[PValue], more: Sequence[Callable[[int], PValue] | None], alpha: float, most: int = MOST_DRAWS
) -> Resolved:
    """Holm over ``values``, with more draws for each test whose mark its Monte Carlo error leaves
    open, up to ``most``. ``more[i](draws)`` re-estimates test ``i`` with ``draws`` draws (None: it
    cannot be)."""
    current = list(values)
    while True:
        low = _marks([max(0.0, v.p - RESOLVE_Z * v.error) for v in current], alpha)
        high = _marks([min(1.0, v.p + RESOLVE_Z * v.error) for v in current], alpha)
        open_marks = [i for i in range(len(current)) if low[i] != high[i]]
        refinable = [i for i in open_marks if more[i] is not None and 0 < current[i].draws < most]
        if not refinable:
            break
        for i in refinable:
            current[i] = more[i](min(most, 10 * current[i].draws))  # type: ignore[misc]
    decided = [i not in open_marks for i in range(len(current))]
    return Resolved(current, holm([v.p for v in current]), decided)
