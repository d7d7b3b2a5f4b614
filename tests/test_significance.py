"""Query-level significance: seeds averaged per query, a randomisation test, Holm over the heads, the
paper's seed t-test beside it, and marks only where the corrected query-level test earns them."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from clipmag.results.marks import difference_text, family_mark, mark
from clipmag.results.randomisation import sign_flip
from clipmag.results.record import build_results, write_results
from clipmag.results.significance import (
    compare_with_baseline,
    detectable_difference,
    holm,
    mcnemar_p,
    paired_query_p,
    paired_seed_p,
    with_family_holm,
)
from clipmag.scoring.head_record import HeadRecord
from clipmag_experiments.report import build_report
from clipmag_experiments.report.collect import find_cells
from clipmag_experiments.report.starts import start_rows


def _exact_sign_flip_p(d: list[float]) -> float:
    """Every sign pattern enumerated: the definition of the two-sided randomisation test."""
    d = np.asarray(d, dtype=float)
    observed = abs(d.mean())
    flips = [abs((d * np.array(signs)).mean()) for signs in itertools.product((-1, 1), repeat=d.size)]
    return float(np.mean(np.array(flips) >= observed - 1e-12))


def test_randomisation_test_is_exact_for_few_queries_and_ignores_ties():
    d = [0.3, 0.1, -0.05, 0.2, 0.15, 0.4, -0.1, 0.25]
    assert paired_query_p(d, [0.0] * len(d)) == pytest.approx(_exact_sign_flip_p(d))
    # queries both score alike change no p: 6 wins and 50 ties is 2 / 2**6
    assert paired_query_p([0.6] * 6 + [0.3] * 50, [0.3] * 56) == pytest.approx(2 / 2**6)
    assert paired_query_p([0.2, 0.4], [0.2, 0.4]) == 1.0
    # one query of 500 differs (seed-averaged, so not 0/1): both its sign flips are as extreme, p = 1
    assert paired_query_p([2 / 3] + [1.0] * 499, [1.0] * 500) == 1.0 == _exact_sign_flip_p([-1 / 3])
    with pytest.raises(ValueError, match="6 values against 5"):
        paired_query_p([0.1] * 6, [0.1] * 5)


def test_binary_outcomes_take_mcnemars_exact_test():
    a, b = [1, 1, 1, 1, 1, 0, 0, 1], [0, 0, 0, 0, 1, 1, 0, 1]
    assert paired_query_p(a, b) == pytest.approx(stats.binomtest(4, 5, 0.5).pvalue) == mcnemar_p(a, b)


def test_many_queries_are_seeded_and_close_to_wilcoxon():
    rng = np.random.default_rng(0)
    a = rng.random(300)
    b = a + rng.normal(0.02, 0.1, 300)
    p = paired_query_p(a, b)
    assert p == paired_query_p(a, b)  # seeded: the same p every time
    assert p == pytest.approx(stats.wilcoxon(a - b).pvalue, abs=0.02)


def test_holm_is_statsmodels_and_the_seed_test_is_scipys():
    ps = [0.01, 0.04, 0.03, 0.2]
    assert holm(ps) == pytest.approx(list(multipletests(ps, method="holm")[1]))
    rng = np.random.default_rng(4)
    for family in ([0.5], [0.04, 0.04, 0.01], [0.3, 0.9, 0.6, 0.02], list(rng.random(7) ** 3)):
        assert holm(family) == list(multipletests(family, method="holm")[1])  # to the last bit
    a, b = {0: 0.5, 1: 0.6, 2: 0.55}, {0: 0.4, 1: 0.45, 2: 0.5}
    assert paired_seed_p(a, b) == pytest.approx(stats.ttest_rel([0.5, 0.6, 0.55], [0.4, 0.45, 0.5]).pvalue)
    assert paired_seed_p({0: 0.5}, {0: 0.4}) is None


def test_comparison_averages_seeds_per_query_and_corrects_over_heads():
    rng = np.random.default_rng(1)
    queries = sorted(f"q{i}" for i in range(40))  # the comparison's order (Monte Carlo draws pair with it)
    base = {s: {q: float(rng.random()) for q in queries} for s in (0, 1)}
    systems = {
        "cosine": base,
        "dot": {s: {q: base[s][q] - 0.2 + float(rng.normal(0, 0.05)) for q in queries} for s in (0, 1)},
        "qnorm": {s: {q: base[s][q] + float(rng.normal(0, 0.05)) for q in queries} for s in (0, 1)},
    }
    result = compare_with_baseline(systems, "cosine")
    averaged = {h: np.array([np.mean([systems[h][s][q] for s in (0, 1)]) for q in queries]) for h in systems}
    raw = {h: paired_query_p(averaged[h], averaged["cosine"]) for h in ("dot", "qnorm")}
    corrected = dict(zip(raw, holm(list(raw.values()))))
    for head in ("dot", "qnorm"):
        assert result[head].p == pytest.approx(raw[head])
        assert result[head].p_holm == pytest.approx(corrected[head])
        assert result[head].difference == pytest.approx(np.mean(averaged[head] - averaged["cosine"]))
        assert result[head].ci_low <= result[head].difference <= result[head].ci_high
        assert result[head].n_queries == 40 and result[head].n_seeds == 2
    assert mark(result["dot"]) == "▼" and mark(result["qnorm"]) == ""


QUERIES = [f"q{i}" for i in range(20)]
# 20 per-query differences that one test over the 20 queries does not find (p ~ 0.2), but the same
# differences repeated on three seeds (perfectly correlated, as seeds of one query are) does when
# the 60 (seed, query) pairs are pooled as if they were independent.
DIFFERENCES = [-0.09, -0.07, -0.05, -0.04, -0.03, -0.03, -0.02, -0.02, -0.01, -0.01]
DIFFERENCES += [0.005, 0.01, 0.01, 0.02, 0.02, 0.03, 0.06, -0.08, 0.005, 0.04]


def _write_cell(root: Path, head: str, seed: int, per_query: dict[str, float]) -> None:
    folder = root / "g" / "start" / head / f"seed{seed}"
    folder.mkdir(parents=True)
    metric = {
        "NDCG@10": float(np.mean(list(per_query.values()))),
        "per_query": {q: {"NDCG@10": v} for q, v in per_query.items()},
    }
    cell = {"group": "g", "kind": "text", "model": "start", "head": head, "variant": None, "seed": seed}
    (folder / "cell.json").write_text(json.dumps({**cell, "argv": [], "evaluations": []}))
    record = build_results({"steps": 30, "seed": seed}, HeadRecord({"name": head}), {}, {"set": metric}, {}, {})
    write_results(record, folder)


def test_a_difference_only_pooled_seeds_call_significant_gets_no_mark(tmp_path):
    base = {q: 0.5 + 0.01 * i for i, q in enumerate(QUERIES)}
    for seed in (0, 1, 2):
        _write_cell(tmp_path, "cosine", seed, {q: base[q] + 0.001 * seed for q in QUERIES})
        _write_cell(tmp_path, "dot", seed, {q: base[q] + 0.001 * seed + d for q, d in zip(QUERIES, DIFFERENCES)})
    pooled = stats.wilcoxon(DIFFERENCES * 3).pvalue
    assert pooled < 0.05  # what the old pooled test would have marked
    (row,) = start_rows(find_cells(tmp_path))
    comparison = row.heads["dot"].comparison
    in_order = [dict(zip(QUERIES, DIFFERENCES))[q] for q in sorted(QUERIES)]
    assert comparison.p > 0.05 and comparison.p == pytest.approx(paired_query_p(in_order, [0.0] * 20))
    assert row.marked("▼") == [] and mark(comparison) == ""
    report = build_report(tmp_path, allow_mixed=True).read_text()
    rows = [line for line in report.splitlines() if line.startswith("| ")]  # every table row of the report
    assert rows and not any("▼" in row or "▲" in row for row in rows)
    assert "below: none" in report[report.index("## Starting points") :]
    assert "randomisation test over queries" in report and "Holm" in report


def test_the_detectable_difference_is_the_textbook_paired_value_and_grows_with_the_holm_family():
    d = np.random.default_rng(2).normal(0.0, 1.0, 100)
    d = (d - d.mean()) / d.std(ddof=1)  # sd exactly 1 over 100 queries
    # (z_0.975 + z_0.8) / sqrt(100): Cohen's detectable paired effect of 0.28 sd at n = 100
    assert detectable_difference(d) == pytest.approx((1.959964 + 0.841621) / 10, abs=1e-5)
    assert detectable_difference(d, family=4) == pytest.approx((stats.norm.ppf(1 - 0.05 / 8) + 0.841621) / 10)
    assert detectable_difference(2 * d) == pytest.approx(2 * detectable_difference(d))
    assert detectable_difference([0.3]) == 0.0


def test_the_randomisation_test_finds_the_detectable_difference_about_four_times_in_five():
    """Simulated: per-query differences with mean = the closed form's MDE for sd 1 over 100 queries."""
    rng = np.random.default_rng(3)
    mde = (stats.norm.ppf(0.975) + stats.norm.ppf(0.8)) / 10
    samples = [rng.normal(mde, 1.0, 100) for _ in range(120)]
    p_values = [paired_query_p(d, np.zeros(100)) for d in samples]
    assert 0.68 <= np.mean(np.array(p_values) < 0.05) <= 0.9  # 0.8 within about two binomial SEs (0.037)
    z_test = [2 * stats.norm.sf(abs(d.mean()) / (d.std(ddof=1) / 10)) for d in samples[:10]]
    assert p_values[:10] == pytest.approx(z_test, abs=0.015)  # at this size the two tests agree


def test_every_comparison_carries_its_detectable_difference_and_the_tables_print_it(tmp_path):
    base = {q: 0.5 + 0.01 * i for i, q in enumerate(QUERIES)}
    for seed in (0, 1, 2):
        _write_cell(tmp_path, "cosine", seed, {q: base[q] + 0.001 * seed for q in QUERIES})
        _write_cell(tmp_path, "dot", seed, {q: base[q] + 0.001 * seed + d for q, d in zip(QUERIES, DIFFERENCES)})
    (row,) = start_rows(find_cells(tmp_path))
    comparison = row.heads["dot"].comparison
    in_order = [dict(zip(QUERIES, DIFFERENCES))[q] for q in sorted(QUERIES)]
    assert comparison.detectable == pytest.approx(detectable_difference(in_order, family=1))
    report = build_report(tmp_path, allow_mixed=True).read_text()
    text = difference_text(comparison)
    assert text.startswith("Δ ") and f"MDE {100 * comparison.detectable:.2f}" in text
    assert report.count(text) == 2  # the retrieval table and the starting-point table
    assert "80% power" in report


def test_ties_count_in_without_moving_p_and_the_interval_and_mde_average_over_them():
    """A zero difference adds 0 to every flipped mean, so the exact randomisation distribution with
    the ties counted in (every sign pattern of all 12 queries enumerated) gives the p of the 8
    differing queries alone; the effect, its interval and the MDE are over all 12."""
    differing = [0.3, 0.1, -0.05, 0.2, 0.15, 0.4, -0.1, 0.25]
    d = differing + [0.0] * 4
    assert paired_query_p(d, [0.0] * 12) == pytest.approx(_exact_sign_flip_p(d)) == _exact_sign_flip_p(differing)
    systems = {
        "cosine": {0: {f"q{i:02d}": 0.5 for i in range(12)}},
        "dot": {0: {f"q{i:02d}": 0.5 + x for i, x in enumerate(d)}},
    }
    (comparison,) = compare_with_baseline(systems, "cosine").values()
    assert comparison.n_queries == 12 and comparison.difference == pytest.approx(np.mean(d))
    assert comparison.detectable == pytest.approx(detectable_difference(d)) != detectable_difference(differing)


def _exact_cluster_p(d: list[float], clusters: list[str]) -> float:
    """Every sign pattern of the clusters enumerated, each flipping all of its queries together."""
    names = sorted(set(clusters))
    d = np.asarray(d, dtype=float)
    observed = abs(d.mean())
    flips = []
    for signs in itertools.product((-1, 1), repeat=len(names)):
        sign_of = dict(zip(names, signs))
        flips.append(abs(np.mean([x * sign_of[c] for x, c in zip(d, clusters)])))
    return float(np.mean(np.array(flips) >= observed - 1e-12))


def test_queries_sharing_a_target_flip_together():
    """Five captions of one image move together: the test flips images, not captions."""
    clusters = [f"image-{i // 3}" for i in range(15)]  # 5 images, 3 captions each
    a = [1, 1, 1, 1, 1, 0, 1, 1, 1, 0, 0, 0, 1, 1, 0]
    b = [0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0]
    d = list(np.subtract(a, b, dtype=float))
    assert paired_query_p(a, b, clusters) == pytest.approx(_exact_cluster_p(d, clusters))
    # the clustered p is far larger than McNemar's over the captions as if independent
    assert paired_query_p(a, b, clusters) > 0.05 > paired_query_p(a, b)
    # every query its own cluster: the test over queries, unchanged
    assert paired_query_p(a, b, [f"q{i}" for i in range(15)]) == paired_query_p(a, b)
    with pytest.raises(ValueError, match="3 cluster labels for 15 differences"):
        paired_query_p(a, b, clusters[:3])


def test_the_clustered_interval_and_mde_widen_with_the_correlation_the_queries_share():
    """Captions of one image scored alike: 200 images x 5 captions carry the information of 200
    queries, so the MDE is sqrt(5) times the one that counts 1,000 independent queries, and the
    cluster bootstrap's interval is wider by about as much."""
    rng = np.random.default_rng(6)
    per_image = np.repeat(rng.normal(0.02, 0.3, 200), 5)
    queries = [f"text-{i:04d}" for i in range(1000)]
    clusters = {q: f"image-{i // 5}" for i, q in enumerate(queries)}
    systems = {"cosine": {0: dict.fromkeys(queries, 0.5)}, "dot": {0: dict(zip(queries, 0.5 + per_image))}}
    flat = compare_with_baseline(systems, "cosine")["dot"]
    grouped = compare_with_baseline(systems, "cosine", clusters)["dot"]
    assert grouped.n_units == 200 and flat.n_units is None and grouped.n_queries == flat.n_queries == 1000
    assert grouped.difference == pytest.approx(flat.difference)
    assert grouped.detectable == pytest.approx(np.sqrt(5) * flat.detectable, rel=0.01)
    widths = [c.ci_high - c.ci_low for c in (flat, grouped)]
    assert widths[1] / widths[0] == pytest.approx(np.sqrt(5), rel=0.1)
    image_means = per_image[::5]
    # flipping each image's summed difference is flipping its mean: the same p at the same draws
    assert grouped.p == pytest.approx(sign_flip(image_means, draws=grouped.p_draws).p)
    # one query per cluster: the cluster-robust MDE is the textbook one
    assert detectable_difference(per_image, clusters=queries) == detectable_difference(per_image)


def test_the_whole_table_holm_corrects_over_every_test_and_marks_only_what_survives_it():
    rng = np.random.default_rng(7)
    queries = [f"q{i:03d}" for i in range(200)]
    base = {0: {q: float(rng.random()) for q in queries}}
    shifted = {
        h: {0: {q: v + shift + float(rng.normal(0, 0.2)) for q, v in base[0].items()}}
        for h, shift in (("dot", 0.06), ("qnorm", -0.3), ("dnorm", 0.0))
    }
    rows = [compare_with_baseline({"cosine": base, **shifted}, "cosine")]
    comparisons = [c for row in rows for c in row.values()]
    family = with_family_holm(comparisons)
    assert [c.p_family for c in family] == holm([c.p for c in comparisons])
    assert all(f.p_family >= c.p_holm for c, f in zip(comparisons, family))
    assert [family_mark(c) for c in comparisons] == ["", "", ""]  # no family computed: no mark
    assert family_mark(family[1]) == "†" and mark(family[1]) == "▼"
