"""The Wilcoxon signed-rank p-value is exact when few questions differ, scipy's approximation above."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import wilcoxon

from clipmag.significance import EXACT_SIGNED_RANK_MAX, paired_question_p, signed_rank_p


def test_six_wins_among_heavy_ties_is_the_exact_two_sided_value():
    assert signed_rank_p([0.1] * 6 + [0.0] * 50) == pytest.approx(2 / 2**6)
    a = [0.6] * 6 + [0.3] * 50
    b = [0.3] * 56
    assert paired_question_p(a, b) == pytest.approx(0.03125)


def test_exact_value_matches_scipy_without_ties_and_the_approximation_is_used_for_many():
    rng = np.random.default_rng(0)
    d = rng.normal(0.2, 1.0, 25)
    assert signed_rank_p(d) == pytest.approx(wilcoxon(d, method="exact").pvalue)
    many = rng.normal(0.1, 1.0, EXACT_SIGNED_RANK_MAX + 10)
    assert signed_rank_p(many) == pytest.approx(wilcoxon(many).pvalue)
    assert signed_rank_p([0.0, 0.0]) == 1.0


def test_ties_use_mid_ranks_in_the_exact_distribution():
    # |d| = 1, 1, 2: mid-ranks 1.5, 1.5, 3; the positive rank sums of the 8 sign patterns are
    # 0, 1.5, 1.5, 3, 3, 4.5, 4.5, 6: all positive (6) is 1 of 8, a sum of 4.5 or more 3 of 8
    assert signed_rank_p([1.0, 1.0, 2.0]) == pytest.approx(2 / 8)
    assert signed_rank_p([1.0, -1.0, 2.0]) == pytest.approx(2 * 3 / 8)
