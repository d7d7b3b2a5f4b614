"""Paired significance tests over questions (or queries) that two systems both answered.

Comparing two heads on the same questions is a paired design: each question is scored by both, so
the test looks only at how the two differ question by question, which has far more power than a
comparison of means. With one outcome per question and system that is 0 or 1 (a hit, an exact
match), the exact test is McNemar's: a two-sided binomial test on the questions where exactly one
system is right. With graded outcomes (F1, or a hit rate averaged over seeds) it is the Wilcoxon
signed-rank test on the per-question differences. Both come from ``scipy.stats``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.stats import binomtest, wilcoxon

__all__ = ["mcnemar_p", "paired_question_p"]


def mcnemar_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Exact two-sided McNemar p-value of paired binary outcomes (1.0 when they never disagree)."""
    only_a = sum(1 for x, y in zip(a, b) if x and not y)
    only_b = sum(1 for x, y in zip(a, b) if y and not x)
    if only_a + only_b == 0:
        return 1.0
    return float(binomtest(only_a, only_a + only_b, 0.5).pvalue)


def paired_question_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value that ``a`` and ``b`` (one value per question, same order) differ.

    McNemar's exact test when every value is 0 or 1, else the Wilcoxon signed-rank test (questions
    where both agree carry no information and are dropped, as McNemar drops them). 1.0 when the two
    never differ.
    """
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"paired test: {x.size} values against {y.size}; both sides need one per question")
    if np.isin(x, (0.0, 1.0)).all() and np.isin(y, (0.0, 1.0)).all():
        return mcnemar_p(x, y)
    differences = x - y
    if not np.any(differences):
        return 1.0
    return float(wilcoxon(differences, zero_method="wilcox").pvalue)
