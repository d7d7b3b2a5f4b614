"""Queries that share a target (five captions of one image) as the tests' independent units.

Both the query-level randomisation test (:mod:`clipmag.results.significance`) and the seed-aware
bootstrap (:mod:`clipmag.results.two_level`) resample or flip clusters, not queries, where queries
share a target: one function sums them for both.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

__all__ = ["cluster_sums"]


def cluster_sums(differences: Sequence[float], clusters: Sequence[Hashable]) -> tuple[np.ndarray, np.ndarray]:
    """Each cluster's summed difference and its number of queries, clusters in order of first sight.

    A cluster's queries move together, so the cluster is what the tests treat as independent: its
    sum is what a sign flip flips and what the bootstrap resamples (with its size, so the resampled
    statistic stays the mean over queries)."""
    d = np.asarray(differences, dtype=float)
    labels = list(clusters)
    if len(labels) != d.size:
        raise ValueError(f"paired test: {len(labels)} cluster labels for {d.size} differences; give one per query")
    index = {label: i for i, label in enumerate(dict.fromkeys(labels))}
    inverse = np.array([index[label] for label in labels], dtype=int)
    return np.bincount(inverse, weights=d, minlength=len(index)), np.bincount(inverse, minlength=len(index))
