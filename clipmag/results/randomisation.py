"""The paired sign-flip randomisation test, exact wherever its distribution can be computed, and a
Monte Carlo estimate with a stated error (and more draws on request) where it cannot.

Why not ``scipy.stats.permutation_test`` alone: a mark is drawn where a p-value, after Holm over a
family of tens of tests, crosses 0.05. Two things then matter that a fixed 20,000 draws compared in
floating point get wrong:

* **Ties on a lattice.** Outcomes that are 0 or 1 per query, averaged over ``k`` seeds, are
  multiples of ``1 / k``; their flipped sums land exactly on the observed sum for many flips. Summed
  in floating point in different orders, ``1/3 + 1/3`` and ``2/3`` differ in the last bit, and such
  ties fall out of the "as extreme" count, so p comes out too small. Here the values are scaled to
  integers first (:func:`lattice_scale`), and the randomisation distribution of an integer sum is
  computed exactly by convolution (each unit adds ``+u`` or ``-u`` with probability 1/2): no draws,
  no rounding, every tie counted.
* **Resolution.** Away from a lattice (nDCG's log discounts), flips are drawn: ``p = (1 + hits) /
  (1 + draws)`` (a valid p-value at any number of draws), with its Monte Carlo standard error
  ``sqrt(p (1 - p) / draws)``. :func:`sign_flip` takes the number of draws, so the family's
  correction (:mod:`clipmag.results.family`) can ask for more where a p sits within a few errors of
  the threshold it is compared with. Few units are enumerated exactly instead.

The statistic is the sum of the units' values (for a fixed set of units, the mean over queries is
that sum over a constant), two-sided, or one-sided for the equivalence tests.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["FIRST_DRAWS", "PValue", "lattice_scale", "sign_flip"]

FIRST_DRAWS = 20_000
SEED = 0
ENUMERATE_UP_TO = 20  # units: 2**20 sign patterns are enumerated rather than drawn
LATTICE_DENOMINATORS = 1_000  # a lattice of step 1/k is found for k up to this
CONVOLUTION_WORK = 400_000_000  # units x lattice width above which the exact convolution is not tried
DRAWS_PER_BATCH_VALUES = 4_000_000  # flips x units held at once


@dataclass(frozen=True)
class PValue:
    """A p-value and how well it is known: ``error`` is 0 for an exact p, else its Monte Carlo SE."""

    p: float
    draws: int = 0  # 0: exact
    error: float = 0.0

    @property
    def exact(self) -> bool:
        return self.draws == 0


def lattice_scale(values: np.ndarray) -> int | None:
    """The smallest ``k`` for which every value times ``k`` is an integer (to 1e-9), or None.

    0/1 outcomes averaged over ``k`` seeds (and sums of them over a cluster's queries) are multiples
    of ``1 / k``; nDCG values are not on any such lattice."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return 1
    for k in range(1, LATTICE_DENOMINATORS + 1):
        scaled = v * k
        if np.all(np.abs(scaled - np.round(scaled)) <= 1e-9 * np.maximum(1.0, np.abs(scaled))):
            return k
    return None


def _exact_by_convolution(units: np.ndarray, observed: int, alternative: str) -> float:
    """The exact randomisation p of an integer sum: its distribution built unit by unit."""
    width = int(np.abs(units).sum())
    probability = np.zeros(2 * width + 1)
    probability[width] = 1.0  # index width is a sum of 0
    for u in np.abs(units):
        if u == 0:
            continue
        shifted = np.zeros_like(probability)
        shifted[u:] += 0.5 * probability[:-u]
        shifted[:-u] += 0.5 * probability[u:]
        probability = shifted
    sums = np.arange(-width, width + 1)
    if alternative == "two-sided":
        extreme = np.abs(sums) >= abs(observed)
    elif alternative == "greater":
        extreme = sums >= observed
    else:
        extreme = sums <= observed
    return float(min(1.0, probability[extreme].sum()))


def _as_extreme(flipped: np.ndarray, observed: float, alternative: str, tolerance: float) -> np.ndarray:
    if alternative == "two-sided":
        return np.abs(flipped) >= abs(observed) - tolerance
    if alternative == "greater":
        return flipped >= observed - tolerance
    return flipped <= observed + tolerance


def _enumerated(values: np.ndarray, alternative: str, tolerance: float) -> float:
    patterns = (np.arange(2**values.size)[:, None] >> np.arange(values.size)) & 1
    flipped = (2.0 * patterns - 1.0) @ values
    return float(np.mean(_as_extreme(flipped, float(values.sum()), alternative, tolerance)))


def _byte_tables(values: np.ndarray) -> np.ndarray:
    """For each run of 8 units, the sum of every one of its 256 sign patterns (bit set: +v): a
    drawn pattern's sum is then one look-up per 8 units, not 8 multiply-adds."""
    padded = np.concatenate([values, np.zeros(-values.size % 8)]).reshape(-1, 8)
    bits = (np.arange(256)[:, None] >> np.arange(8)) & 1  # 256 x 8
    return padded @ (2.0 * bits - 1.0).T  # groups x 256


def _drawn(values: np.ndarray, alternative: str, draws: int, tolerance: float) -> PValue:
    """``draws`` seeded sign patterns, read from the generator's raw 64-bit words, so the first
    draws are the same whatever ``draws`` and the batches are: asking for more extends an estimate
    rather than replacing it with an unrelated one."""
    generator = np.random.default_rng(SEED).bit_generator
    tables = _byte_tables(values)
    groups, words = tables.shape[0], -(-tables.shape[0] // 8)
    observed = float(values.sum())
    batch = max(1, DRAWS_PER_BATCH_VALUES // groups)
    hits = 0
    for start in range(0, draws, batch):
        size = min(batch, draws - start)
        patterns = generator.random_raw(size * words).view(np.uint8).reshape(size, words * 8)[:, :groups]
        flipped = tables[np.arange(groups), patterns].sum(axis=1)
        hits += int(_as_extreme(flipped, observed, alternative, tolerance).sum())
    p = (1 + hits) / (1 + draws)
    return PValue(p, draws, float(np.sqrt(p * (1 - p) / draws)))


def sign_flip(values: np.ndarray, alternative: str = "two-sided", draws: int = FIRST_DRAWS) -> PValue:
    """The sign-flip randomisation p of the sum of ``values`` (one per independent unit).

    ``alternative``: ``two-sided``, ``greater`` (the sum is above 0) or ``less``. Exact on a lattice
    (:func:`lattice_scale`) or with at most ``ENUMERATE_UP_TO`` non-zero units; else ``draws`` seeded
    draws. A unit whose value is 0 adds 0 under every flip, so it is left out (the p is the same)."""
    v = np.asarray(values, dtype=float)
    if alternative not in ("two-sided", "greater", "less"):
        raise ValueError(f"sign_flip: alternative {alternative!r}; use two-sided, greater or less")
    k = lattice_scale(v)
    if k is not None:
        units = np.round(v * k).astype(np.int64)
        units = units[units != 0]
        if units.size == 0:
            return PValue(1.0)
        if units.size * np.abs(units).sum() <= CONVOLUTION_WORK:
            return PValue(_exact_by_convolution(units, int(units.sum()), alternative))
    v = v[v != 0]
    if v.size == 0:
        return PValue(1.0)
    tolerance = 1e-9 * float(np.abs(v).sum())
    if v.size <= ENUMERATE_UP_TO:
        return PValue(_enumerated(v, alternative, tolerance))
    return _drawn(v, alternative, draws, tolerance)
