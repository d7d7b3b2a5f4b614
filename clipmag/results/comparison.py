"""One head's comparison with a baseline, and the evidence its tests read.

Kept apart from the tests that make a comparison (:mod:`clipmag.results.significance`, one row of
heads) and from the correction over a family of them (:mod:`clipmag.results.family`, a whole table),
so that both import the record and neither imports the other's work. ``Evidence`` holds what a
test needs to be re-run with more draws, so a family can resolve a p at its own level; a
``Comparison`` read back without it carries each p's draws and Monte Carlo error instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields

import numpy as np

from clipmag.results.randomisation import FIRST_DRAWS, PValue, sign_flip
from clipmag.results.two_level import FIRST_REPLICATES, TwoLevel

__all__ = ["ALPHA", "POWER", "Comparison", "Evidence", "mde_z"]

ALPHA = 0.05
POWER = 0.8


def mde_z(family: int) -> float:
    """The normal quantiles behind an MDE: ``z_{1 - alpha / (2 family)} + z_power`` (the first step of a
    Holm family of ``family`` tests decides whether one true difference among nulls is found)."""
    from scipy import stats

    return float(stats.norm.ppf(1 - ALPHA / (2 * max(1, family))) + stats.norm.ppf(POWER))


class Evidence:
    """What a comparison's tests read, kept so a family can ask for more draws: the units' summed
    seed-averaged differences (queries, or clusters), their sizes, and the seed x query replicates.

    Each p is computed once per number of draws (and margin): the manuals' renderers put one table
    under its family's correction many times, and the same draws give the same p."""

    def __init__(self, units: np.ndarray, sizes: np.ndarray, two_level: TwoLevel | None) -> None:
        self.units, self.sizes, self.two_level = units, sizes, two_level
        self._known: dict[tuple, PValue | None] = {}

    def _once(self, key: tuple, compute: Callable[[], PValue | None]) -> PValue | None:
        if key not in self._known:
            self._known[key] = compute()
        return self._known[key]

    def query_p(self, draws: int = FIRST_DRAWS) -> PValue:
        return self._once(("query", draws), lambda: sign_flip(self.units, draws=draws))  # type: ignore[return-value]

    def query_equivalence_p(self, margin: float, draws: int = FIRST_DRAWS) -> PValue:
        """Two one-sided sign-flip tests: the difference is below ``+margin`` and above ``-margin``."""

        def both() -> PValue:
            below = sign_flip(self.units - margin * self.sizes, "less", draws)
            above = sign_flip(self.units + margin * self.sizes, "greater", draws)
            return max(below, above, key=lambda v: v.p)

        return self._once(("query-equivalence", margin, draws), both)  # type: ignore[return-value]

    def two_level_p(self, draws: int = FIRST_REPLICATES) -> PValue | None:
        if self.two_level is None:
            return None
        return self._once(("two-level", draws), lambda: self.two_level.p(draws))  # type: ignore[union-attr]

    def two_level_equivalence_p(self, margin: float, draws: int = FIRST_REPLICATES) -> PValue | None:
        if self.two_level is None:
            return None
        sides = [self.two_level.p(draws, margin, side) for side in ("below", "above")]
        return max(sides, key=lambda v: v.p)


@dataclass(frozen=True)
class Comparison:
    """One head against the baseline on one test set: effect, tests and the mark they earn."""

    n_queries: int
    n_seeds: int
    difference: float  # mean over queries of (head - baseline), seeds averaged
    ci_low: float
    ci_high: float
    p: float  # the query-level test, uncorrected
    p_holm: float  # corrected over the heads compared with the same baseline
    p_seeds: float | None  # the paper's paired t-test over seed means
    detectable: float = float("nan")  # the smallest difference found with 80% power (detectable_difference)
    n_units: int | None = None  # the clusters the test flipped, where queries share a target; None: the queries
    p_family: float | None = None  # Holm over every comparison a claim rests on (with_family_holm)
    se: float = float("nan")  # the query-level standard error of the difference (standard_error)
    p_draws: int = 0  # the query-level p's Monte Carlo draws (0: exact) and its Monte Carlo error
    p_error: float = 0.0
    p_two_level: float | None = None  # the seed-aware test (two_level): seeds and queries resampled
    p_two_level_replicates: int = 0  # its bootstrap replicates and its Monte Carlo error
    p_two_level_error: float = 0.0
    p_two_level_holm: float | None = None
    p_two_level_family: float | None = None
    two_level_low: float | None = None  # its 95% interval of the difference
    two_level_high: float | None = None
    detectable_family: float | None = None  # the MDE at the family's Holm level (beside p_family)
    margin: float | None = None  # the equivalence margin the family was tested with
    p_equivalent_family: float | None = None  # two one-sided tests within the margin, Holm over the family
    p_equivalent_two_level_family: float | None = None
    unresolved: bool = False  # a family mark the Monte Carlo error left open at MOST_DRAWS
    evidence: Evidence | None = field(default=None, compare=False, repr=False)

    @property
    def significant(self) -> bool:
        """The row's mark: the query-level test and, with 2+ seeds, the seed-aware one, each under
        the row's Holm."""
        return self.p_holm < ALPHA and (self.p_two_level_holm is None or self.p_two_level_holm < ALPHA)

    @property
    def family_significant(self) -> bool:
        """The whole family's mark (†): both tests under the family's Holm, and decided."""
        if self.p_family is None or self.unresolved:
            return False
        return self.p_family < ALPHA and (self.p_two_level_family is None or self.p_two_level_family < ALPHA)

    @property
    def family_equivalent(self) -> bool:
        """Equivalent within ``margin``: both two-one-sided tests under the family's Holm."""
        if self.p_equivalent_family is None or self.unresolved:
            return False
        both = self.p_equivalent_two_level_family
        return self.p_equivalent_family < ALPHA and (both is None or both < ALPHA)

    def to_dict(self) -> dict[str, float | int | None]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "evidence"}
