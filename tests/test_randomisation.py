"""The tests a mark rests on, at the level it is drawn at: exact lattice ties, Monte Carlo errors
resolved under Holm, the seed-aware two-level bootstrap and the equivalence tests."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from clipmag.results.family import MOST_DRAWS, holm, resolved_holm
from clipmag.results.marks import equivalence_mark, family_mark, family_verdict
from clipmag.results.randomisation import PValue, lattice_scale, sign_flip
from clipmag.results.significance import compare_with_baseline, with_family_holm
from clipmag.results.two_level import two_level_bootstrap


def _enumerated_exactly(values: list[Fraction]) -> Fraction:
    """Every sign pattern, in rational arithmetic: the definition, with every tie counted."""
    observed = abs(sum(values))
    hits = sum(
        1
        for signs in itertools.product((-1, 1), repeat=len(values))
        if abs(sum(s * v for s, v in zip(signs, values))) >= observed
    )
    return Fraction(hits, 2 ** len(values))


def test_outcomes_averaged_over_seeds_count_every_tie_of_the_lattice():
    """0/1 hits averaged over 3 seeds: differences in thirds. Their flipped sums meet the observed
    sum exactly for many patterns; summed in floating point some of those ties were lost."""
    rng = np.random.default_rng(3)
    thirds = [Fraction(int(k), 3) for k in rng.integers(-3, 4, size=16) if k != 0]
    exact = _enumerated_exactly(thirds)
    assert lattice_scale(np.array([float(x) for x in thirds])) == 3
    value = sign_flip(np.array([float(x) for x in thirds]))
    assert value.exact and value.p == pytest.approx(float(exact), abs=1e-12)


def test_a_lattice_of_many_units_is_exact_without_draws():
    """A thousand 0/1 outcomes averaged over 5 seeds: the convolution's p, exact, equals the normal
    approximation to its distribution closely, and no draw is made."""
    rng = np.random.default_rng(4)
    d = rng.integers(-5, 6, size=1000) / 5 + 0.0
    d[:40] = 1.0  # a shift
    value = sign_flip(d)
    assert value.exact and value.error == 0.0
    z = d.sum() / np.sqrt(np.sum(d**2))
    assert value.p == pytest.approx(2 * stats.norm.sf(abs(z)), rel=0.05)


def test_one_seed_of_binary_outcomes_is_mcnemars_exact_test():
    a = np.array([1, 1, 1, 1, 1, 0, 0, 1, 1, 0, 1, 1] * 3)
    b = np.array([0, 0, 0, 0, 1, 1, 0, 1, 0, 0, 1, 0] * 3)
    value = sign_flip((a - b).astype(float))
    assert value.exact and value.p == pytest.approx(stats.binomtest(18, 21, 0.5).pvalue)


def test_drawn_p_states_its_error_and_more_draws_extend_the_same_stream():
    rng = np.random.default_rng(5)
    d = rng.normal(0.01, 0.2, 800)
    first, more = sign_flip(d, draws=20_000), sign_flip(d, draws=200_000)
    assert not first.exact and first.draws == 20_000
    assert first.error == pytest.approx(np.sqrt(first.p * (1 - first.p) / 20_000))
    assert abs(first.p - more.p) < 4 * first.error
    assert sign_flip(d, draws=20_000) == first  # seeded
    resamples = 50_000  # scipy holds every resample's signs at once: 200,000 x 800 took most of this test
    reference = stats.permutation_test(
        (d,), np.mean, permutation_type="samples", n_resamples=resamples, rng=np.random.default_rng(9)
    ).pvalue
    reference_error = np.sqrt(reference * (1 - reference) / resamples)
    assert abs(reference - more.p) < 4 * np.hypot(more.error, reference_error)  # two independent streams


def test_holm_draws_more_only_where_the_error_leaves_a_mark_open():
    """Two of three p-values sit far from any threshold; one sits near its Holm step (0.05 / 2 at
    rank 2) within its Monte Carlo error: only that one gets more draws."""
    asked: list[int] = []

    def sharper(draws: int) -> PValue:
        asked.append(draws)
        return PValue(0.0262, draws, np.sqrt(0.0262 * 0.9738 / draws))

    values = [PValue(1e-5, 20_000, 2e-5), PValue(0.026, 20_000, 0.0011), PValue(0.7, 20_000, 0.003)]
    resolved = resolved_holm(values, [None, sharper, None], 0.05)
    assert asked[0] == 200_000 and resolved.values[1].draws > 20_000
    assert resolved.decided == [True, True, True]
    assert resolved.adjusted == holm([v.p for v in resolved.values])
    assert resolved.adjusted[1] > 0.05  # 0.0262 x 2: no mark, now known


def test_a_mark_the_cap_cannot_settle_is_reported_open():
    def never_settles(draws: int) -> PValue:
        return PValue(0.05, draws, 0.01)

    resolved = resolved_holm([PValue(0.05, 20_000, 0.01)], [never_settles], 0.05)
    assert resolved.values[0].draws == MOST_DRAWS and resolved.decided == [False]


def _systems(run_shifts: list[float], effect: float, queries: int = 600) -> dict:
    """Per-query scores of cosine and dnorm, one run per entry of ``run_shifts``: a training run's
    own luck, added to every query of that dnorm run at once."""
    rng = np.random.default_rng(11)
    base = rng.random(queries)
    names = [f"q{i:04d}" for i in range(queries)]
    out = {"cosine": {}, "dnorm": {}}
    for s, run_shift in enumerate(run_shifts):
        out["cosine"][s] = dict(zip(names, base + rng.normal(0, 0.05, queries)))
        out["dnorm"][s] = dict(zip(names, base + effect + run_shift + rng.normal(0, 0.05, queries)))
    return out


def test_the_seed_aware_test_sees_training_noise_the_query_test_ignores():
    """Runs that differ by a whole-run shift as large as the effect: the per-query test on the
    seed-averaged scores marks it, the two-level bootstrap does not, so no mark is drawn."""
    noisy = compare_with_baseline(_systems([0.04, -0.03, 0.0], effect=0.01), "cosine")["dnorm"]
    assert noisy.p_holm < 0.001 and noisy.p_two_level_holm > 0.05 and not noisy.significant
    quiet = compare_with_baseline(_systems([0.0] * 5, effect=0.03), "cosine")["dnorm"]
    assert quiet.p_two_level_holm < 0.001 and quiet.significant
    assert quiet.two_level_low < 0.03 < quiet.two_level_high


def test_two_level_replicates_need_two_seeds_and_cover_both_levels():
    assert two_level_bootstrap(np.zeros((1, 10))) is None
    rng = np.random.default_rng(2)
    d = rng.normal(0, 0.1, (4, 300)) + rng.normal(0, 0.05, (4, 1))
    spread = two_level_bootstrap(d).deviations(20_000).std()
    query_only = d.mean(axis=0).std(ddof=1) / np.sqrt(300)
    seed_only = d.mean(axis=1).std(ddof=1) / np.sqrt(4)
    assert spread > query_only and spread == pytest.approx(np.hypot(query_only, seed_only * np.sqrt(3 / 4)), rel=0.2)


def test_equivalence_within_the_margin_is_read_only_where_both_tests_hold():
    steady = [0.001, -0.001, 0.0, 0.0005, -0.0005]
    tiny = compare_with_baseline(_systems(steady, effect=0.001), "cosine")
    big = compare_with_baseline(_systems(steady, effect=0.03), "cosine")
    noisy = compare_with_baseline(_systems([0.05, -0.05, 0.01], effect=0.0), "cosine")
    family = with_family_holm([tiny["dnorm"], big["dnorm"], noisy["dnorm"]], margin=0.01)
    assert [family_verdict(c) for c in family] == ["equivalent", "above", "undecided"]
    assert [equivalence_mark(c) for c in family] == ["≈", "", ""]
    assert family_mark(family[1]) == "†"
    # the MDE beside a family mark is the one at the family's level: wider than the row's
    assert family[1].detectable_family > family[1].detectable
    assert "evidence" not in family[0].to_dict() and family[0].to_dict()["margin"] == 0.01
