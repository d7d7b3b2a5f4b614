"""Paired significance tests over questions (or queries) that two systems both answered.

Comparing two heads on the same questions is a paired design: each question is scored by both, so
the test looks only at how the two differ question by question, which has far more power than a
comparison of means. With one outcome per question and system that is 0 or 1 (a hit, an exact
match), the exact test is McNemar's: a two-sided binomial test on the questions where exactly one
system is right. With graded outcomes (F1, or a hit rate averaged over seeds) it is the Wilcoxon
signed-rank test on the per-question differences: exact (the permutation distribution of the
signed ranks, ties given mid-ranks) when at most ``EXACT_SIGNED_RANK_MAX`` questions differ, where
the normal approximation is poor - 6 wins and no losses among 56 questions is p = 2/64 = 0.031,
not the approximation's 0.014 - and ``scipy.stats.wilcoxon``'s approximation above that.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.stats import binomtest, rankdata, wilcoxon

__all__ = ["mcnemar_p", "paired_question_p", "signed_rank_p", "EXACT_SIGNED_RANK_MAX"]

EXACT_SIGNED_RANK_MAX = 50


def mcnemar_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Exact two-sided McNemar p-value of paired binary outcomes (1.0 when they never disagree)."""
    only_a = sum(1 for x, y in zip(a, b) if x and not y)
    only_b = sum(1 for x, y in zip(a, b) if y and not x)
    if only_a + only_b == 0:
        return 1.0
    return float(binomtest(only_a, only_a + only_b, 0.5).pvalue)


def signed_rank_p(differences: Sequence[float]) -> float:
    """Two-sided Wilcoxon signed-rank p-value of paired differences (zeros dropped; 1.0 if all zero).

    Exact for up to ``EXACT_SIGNED_RANK_MAX`` nonzero differences: every sign pattern is equally
    likely under the null, so the distribution of the positive rank sum is counted by dynamic
    programming over the doubled mid-ranks (integers), and p is twice the smaller tail, capped at 1.
    """
    d = np.asarray(differences, dtype=float)
    d = d[d != 0]
    if d.size == 0:
        return 1.0
    if d.size > EXACT_SIGNED_RANK_MAX:
        return float(wilcoxon(d, zero_method="wilcox").pvalue)
    doubled = np.rint(2 * rankdata(np.abs(d))).astype(int)
    counts = np.zeros(int(doubled.sum()) + 1)
    counts[0] = 1.0
    for r in doubled:
        counts[r:] = counts[r:] + counts[: counts.size - r].copy()
    probability = counts / counts.sum()
    observed = int(doubled[d > 0].sum())
    lower, upper = probability[: observed + 1].sum(), probability[observed:].sum()
    return float(min(1.0, 2 * min(lower, upper)))


def paired_question_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value that ``a`` and ``b`` (one value per question, same order) differ.

    McNemar's exact test when every value is 0 or 1, else the Wilcoxon signed-rank test
    (:func:`signed_rank_p`; questions where both agree carry no information and are dropped, as
    McNemar drops them). 1.0 when the two never differ.
    """
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"paired test: {x.size} values against {y.size}; both sides need one per question")
    if np.isin(x, (0.0, 1.0)).all() and np.isin(y, (0.0, 1.0)).all():
        return mcnemar_p(x, y)
    return signed_rank_p(x - y)
