"""The seed-aware test: a two-level bootstrap that resamples training seeds and queries together.

Why: the query-level randomisation test (:mod:`clipmag.results.randomisation`) takes each query's
score averaged over seeds as fixed, so it answers "would these trained models differ on other
queries?", not "would another training run differ?". Where the seeds disagree as much as the heads
do (three CLIP runs of one head 2.7-4 points apart, effects of 3-4), a per-query mark can stand
while the seed-level t-test gives p = 0.44. A difference that is a property of the head, not of
the runs that happened to be drawn, has to survive both sources of noise.

The design is crossed: every seed of the head and of the baseline scores the same queries, and seed
``s`` of the head is paired with seed ``s`` of the baseline (same data order). One replicate draws
``S`` seed pairs with replacement and, independently, the queries (or the clusters of queries that
share a target, with their sizes) with replacement, and takes the mean difference over what it
drew. Its spread holds both the training noise and the query sampling. With few seeds the
bootstrap sees ``(S - 1) / S`` of the seed variance and its seed draws are coarse (10 distinct ones
for 3 seeds), which is why the protocols ask for 5 seeds where the seed noise is large, and why the
paper's t-test over seed means stays beside it.

The p-value is the centred bootstrap test: under no difference the estimate would spread around 0
as the replicates spread around the estimate. The equivalence tests shift by the margin.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from clipmag.results.clusters import cluster_sums
from clipmag.results.randomisation import PValue

__all__ = ["FIRST_REPLICATES", "TwoLevel", "two_level_bootstrap"]

FIRST_REPLICATES = 10_000
SEED = 0
VALUES_PER_BATCH = 4_000_000


def _draw_counts(rng: np.random.Generator, size: int, units: int) -> np.ndarray:
    """``size`` rows of how often each of ``units`` is drawn in ``units`` draws with replacement."""
    picks = rng.integers(0, units, size=(size, units))
    offsets = (np.arange(size)[:, None] * units + picks).ravel()
    return np.bincount(offsets, minlength=size * units).reshape(size, units).astype(float)


class TwoLevel:
    """The replicates of one comparison: seed pairs x query clusters, seeded, extendable.

    ``differences`` is seeds x queries (head minus baseline, seed by seed); ``clusters`` labels each
    query's target where queries share one."""

    def __init__(self, differences: np.ndarray, clusters: Sequence[Hashable] | None = None) -> None:
        d = np.asarray(differences, dtype=float)
        if d.ndim != 2 or d.shape[0] < 2 or d.shape[1] < 1:
            raise ValueError(f"two-level bootstrap: need seeds x queries with 2+ seeds, got shape {d.shape}")
        labels = list(clusters) if clusters is not None else list(range(d.shape[1]))
        self.sums = np.stack([cluster_sums(row, labels)[0] for row in d])  # seeds x clusters
        self.sizes = cluster_sums(d[0], labels)[1].astype(float)
        self.estimate = float(d.mean())
        self._deviations = np.empty(0)

    def deviations(self, replicates: int) -> np.ndarray:
        """The first ``replicates`` bootstrap estimates minus the estimate (the same first ones for
        any count: more replicates extend the earlier ones)."""
        if self._deviations.size < replicates:
            rng = np.random.default_rng(SEED)
            seeds, groups = self.sums.shape
            batch = max(1, VALUES_PER_BATCH // (groups + seeds))
            parts = []
            for start in range(0, replicates, batch):
                size = min(batch, replicates - start)
                seed_counts = _draw_counts(rng, size, seeds)  # B x S
                group_counts = _draw_counts(rng, size, groups)  # B x G
                totals = np.einsum("bg,bg->b", seed_counts @ self.sums, group_counts)
                queries = seeds * (group_counts @ self.sizes)
                parts.append(totals / queries - self.estimate)
            self._deviations = np.concatenate(parts)
        return self._deviations[:replicates]

    def p(self, replicates: int = FIRST_REPLICATES, margin: float = 0.0, side: str = "two-sided") -> PValue:
        """The centred bootstrap p of "no difference" (``two-sided``), or of one side of an
        equivalence test: ``below`` (the difference is below ``+margin``: rejects "at least
        +margin") or ``above`` (rejects "at most -margin")."""
        dev = self.deviations(replicates)
        t = self.estimate
        if side == "two-sided":
            hits = np.abs(dev) >= abs(t) - 1e-12
        elif side == "below":
            hits = dev <= t - margin + 1e-12
        elif side == "above":
            hits = dev >= t + margin - 1e-12
        else:
            raise ValueError(f"two-level bootstrap: side {side!r}; use two-sided, below or above")
        p = (1 + int(hits.sum())) / (1 + replicates)
        return PValue(p, replicates, float(np.sqrt(p * (1 - p) / replicates)))

    def interval(self, replicates: int = FIRST_REPLICATES, level: float = 0.95) -> tuple[float, float]:
        """The percentile interval of the difference over both levels."""
        values = self.estimate + self.deviations(replicates)
        tail = 100 * (1 - level) / 2
        return float(np.percentile(values, tail)), float(np.percentile(values, 100 - tail))


def two_level_bootstrap(differences: np.ndarray, clusters: Sequence[Hashable] | None = None) -> TwoLevel | None:
    """The replicates of one comparison, or None with fewer than two seeds (no training noise to see)."""
    d = np.asarray(differences, dtype=float)
    if d.ndim != 2 or d.shape[0] < 2:
        return None
    return TwoLevel(d, clusters)
