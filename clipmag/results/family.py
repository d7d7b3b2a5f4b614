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

:func:`with_family_holm` puts a table's comparisons (:mod:`clipmag.results.comparison`) under one
such family: the query-level and the seed-aware test, and with a margin the equivalence tests,
each resolved at the family's level, with the MDE at that level.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from clipmag.results.comparison import ALPHA, Comparison, Evidence, mde_z
from clipmag.results.randomisation import PValue
from clipmag.results.two_level import FIRST_REPLICATES

__all__ = ["MOST_DRAWS", "MOST_REPLICATES", "RESOLVE_Z", "Resolved", "holm", "resolved_holm", "with_family_holm"]

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


def _stored_or(evidence_test: Callable[[Evidence], PValue | None], stored: Callable[[Comparison], PValue | None]):
    """A family's test read from the evidence where a comparison carries it (it can then be
    resolved with more draws), else from the stored values (read back from a results file)."""

    def first(c: Comparison) -> PValue | None:
        return evidence_test(c.evidence) if c.evidence is not None else stored(c)

    return first


def _family(
    comparisons: Sequence[Comparison],
    first: Callable[[Comparison], PValue | None],
    more: Callable[[Evidence, int], PValue | None],
    most: int = MOST_DRAWS,
) -> tuple[list[float | None], list[bool]]:
    """One test over every comparison that has it, resolved under the family's Holm: its adjusted
    p per comparison (None where the comparison has no such test) and whether each mark is decided."""
    tested = [(i, c, value) for i, c in enumerate(comparisons) if (value := first(c)) is not None]
    adjusted: list[float | None] = [None] * len(comparisons)
    decided = [True] * len(comparisons)
    if not tested:
        return adjusted, decided
    resolved = resolved_holm(
        [value for _, _, value in tested],
        [(lambda draws, e=c.evidence: more(e, draws)) if c.evidence is not None else None for _, c, _ in tested],
        ALPHA,
        most,
    )
    for (i, _, _), p, ok in zip(tested, resolved.adjusted, resolved.decided):
        adjusted[i], decided[i] = p, ok
    return adjusted, decided


def _stored_query_p(c: Comparison) -> PValue:
    return PValue(c.p, c.p_draws, c.p_error)


def _stored_two_level_p(c: Comparison) -> PValue | None:
    """The stored seed-aware p with its Monte Carlo error: the one recorded, or, for a record from
    before it was kept, the binomial error of a p drawn from the first replicates."""
    if c.p_two_level is None:
        return None
    if c.p_two_level_replicates:
        return PValue(c.p_two_level, c.p_two_level_replicates, c.p_two_level_error)
    p = c.p_two_level
    return PValue(p, FIRST_REPLICATES, float(np.sqrt(max(p * (1 - p), 1 / FIRST_REPLICATES) / FIRST_REPLICATES)))


def with_family_holm(comparisons: Sequence[Comparison], margin: float | None = None) -> list[Comparison]:
    """The same comparisons, each with ``p_family``: Holm's correction over all of them, for the
    query-level and the seed-aware test alike, each p resolved at the family's level
    (:func:`resolved_holm`), and the MDE at that level (``detectable_family``).

    The per-row correction guards a sentence about one row; a sentence about a whole table needs
    the correction over the whole table. With ``margin`` (the protocol's equivalence margin, on the
    metric's scale), each comparison is also tested for equivalence: two one-sided tests that the
    difference lies within ``±margin``, query-level and seed-aware, under the family's Holm, so a
    comparison reads above, below, equivalent within the margin, or undecided."""
    if not comparisons:
        return []
    query, query_ok = _family(comparisons, _stored_or(Evidence.query_p, _stored_query_p), Evidence.query_p)
    two, two_ok = _family(
        comparisons, _stored_or(Evidence.two_level_p, _stored_two_level_p), Evidence.two_level_p, MOST_REPLICATES
    )
    none: list[float | None] = [None] * len(comparisons)
    equivalent, equivalent_ok = none, [True] * len(comparisons)
    equivalent_two, equivalent_two_ok = none, [True] * len(comparisons)
    if margin is not None:
        equivalent, equivalent_ok = _family(
            comparisons,
            _stored_or(lambda e: e.query_equivalence_p(margin), lambda c: None),
            lambda e, n: e.query_equivalence_p(margin, n),
        )
        equivalent_two, equivalent_two_ok = _family(
            comparisons,
            _stored_or(lambda e: e.two_level_equivalence_p(margin), lambda c: None),
            lambda e, n: e.two_level_equivalence_p(margin, n),
            MOST_REPLICATES,
        )
    z = mde_z(len(comparisons))
    out = []
    for i, c in enumerate(comparisons):
        decided = query_ok[i] and two_ok[i] and equivalent_ok[i] and equivalent_two_ok[i]
        out.append(
            replace(
                c,
                p_family=query[i],
                p_two_level_family=two[i],
                detectable_family=z * c.se if np.isfinite(c.se) else None,
                margin=margin,
                p_equivalent_family=equivalent[i],
                p_equivalent_two_level_family=equivalent_two[i],
                unresolved=c.unresolved or not decided,
            )
        )
    return out
