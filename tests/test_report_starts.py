"""The report's starting-point section: untuned columns, query-level tests, predictor verdicts."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from clipmag.results.marks import difference_text, mark
from clipmag.results.record import build_results, write_results
from clipmag.results.significance import holm, paired_query_p
from clipmag.scoring.head_record import HeadRecord
from clipmag_experiments.design.comparison import ComparisonProtocol
from clipmag_experiments.design.grid import SweepConfig, SweepGroup
from clipmag_experiments.design.protocol import record_start
from clipmag_experiments.report import build_report
from clipmag_experiments.report.collect import find_cells
from clipmag_experiments.report.starts import start_rows

QUERIES = [f"q{i}" for i in range(60)]


def _per_query(head: str, seed: int) -> dict[str, float]:
    rng = np.random.default_rng([("cosine", "dot", "qnorm", "dnorm").index(head), seed])
    lift = {"cosine": 0.0, "qnorm": 0.05}.get(head, -0.02)
    return {q: float(np.clip(0.5 + lift + rng.normal(0, 0.2), 0, 1)) for q in QUERIES}


def _cell(root: Path, group: str, model: str, head: str, seed: int, steps: int, d: float) -> None:
    folder = root / group / model / head / f"seed{seed}"
    folder.mkdir(parents=True)
    per_query = _per_query(head, seed)
    metric = {
        "NDCG@10": float(np.mean(list(per_query.values()))),
        "per_query": {q: {"NDCG@10": v} for q, v in per_query.items()},
        "diagnostics": {"document_norm_effect": {"cohens_d": d}, "document_norm": {"cv": 0.2}},
    }
    cell = {"group": group, "kind": "text", "model": model, "head": head, "variant": None, "seed": seed}
    (folder / "cell.json").write_text(json.dumps({**cell, "argv": [], "evaluations": []}))
    record = build_results({"steps": steps, "seed": seed}, HeadRecord({"name": head}), {}, {"set": metric}, {}, {})
    write_results(record, folder)
    if steps == 0 and head == "cosine":
        predict = folder / "evaluations" / "predict"
        predict.mkdir(parents=True)
        verdicts = {"fisher": {"verdict": "qnorm"}, "query_cv_ratio": {"verdict": "dnorm"}}
        (predict / "results.json").write_text(json.dumps(verdicts))


@pytest.fixture
def runs(tmp_path):
    for head in ("cosine", "dot"):
        _cell(tmp_path, "g-untuned", "start", head, 0, 0, 0.9)
    for head in ("cosine", "qnorm", "dnorm"):
        for seed in (0, 1, 2):
            _cell(tmp_path, "g", "start", head, seed, 30, 1.2 if head == "qnorm" else 0.1)
    return tmp_path


def test_query_level_test_averages_seeds_per_query_and_corrects_over_heads(runs):
    (row,) = start_rows(find_cells(runs))
    averaged = {
        h: [np.mean([_per_query(h, s)[q] for s in (0, 1, 2)]) for q in sorted(QUERIES)]
        for h in ("qnorm", "dnorm", "cosine")
    }
    raw = [paired_query_p(averaged[h], averaged["cosine"]) for h in ("qnorm", "dnorm")]
    assert row.heads["qnorm"].comparison.p == pytest.approx(raw[0])
    assert row.heads["qnorm"].comparison.p_holm == pytest.approx(holm(raw)[0])
    seed_means = {h: [np.mean(list(_per_query(h, s).values())) for s in (0, 1, 2)] for h in ("qnorm", "cosine")}
    assert row.heads["qnorm"].comparison.p_seeds == pytest.approx(
        stats.ttest_rel(seed_means["qnorm"], seed_means["cosine"]).pvalue
    )
    assert row.heads["cosine"].comparison is None
    assert row.untuned == pytest.approx(
        {"cosine": np.mean(list(_per_query("cosine", 0).values())), "dot": np.mean(list(_per_query("dot", 0).values()))}
    )
    assert row.untuned_norms["cohens_d"] == 0.9 and row.heads["qnorm"].cohens_d == [1.2, 1.2, 1.2]


def test_report_section_states_the_winner_and_the_predictors_against_it(runs):
    report = build_report(runs, allow_mixed=True).read_text()
    assert "## Starting points: untuned and fine-tuned, per head" in report
    assert "qnorm said" not in report  # verdicts are named by predictor, with right/wrong against the winner
    assert "fisher said qnorm (right)" in report and "query_cv_ratio said dnorm (wrong)" in report
    assert "Majority-class baseline over these 1 cases: always **qnorm** is right on 1 of 1" in report
    assert "Predictor fisher: right on 1 of 1; it **ties** the majority-class baseline" in report
    assert "Predictor query_cv_ratio: right on 0 of 1; it **loses to** the majority-class baseline" in report
    assert "| start | set |" in report and json.loads((runs / "starts.json").read_text())[0]["start"] == "start"


def test_predictors_are_scored_per_setting_never_counting_one_verdict_twice(runs):
    """The verdict judges the untuned start, so a second setting of the same start is a second
    scorecard of one case, not a second case of one scorecard."""
    for head in ("cosine", "qnorm", "dnorm"):
        for seed in (0, 1, 2):
            _cell(runs, "g-dev-scale", "start", head, seed, 30, 0.1)
    report = build_report(runs, allow_mixed=True).read_text()
    assert "over these 2 cases" not in report
    assert report.count("Majority-class baseline over these 1 cases") == 2
    assert "- Setting `g`:" in report and "- Setting `g-dev-scale`:" in report


def test_the_report_lists_exactly_the_comparison_the_protocol_fixed(runs):
    for head in ("cosine", "qnorm", "dnorm"):
        for seed in (0, 1, 2):
            _cell(runs, "g-other", "start", head, seed, 30, 0.1)
    groups = [SweepGroup(name=g, heads=["cosine", "qnorm", "dnorm"]) for g in ("g-untuned", "g", "g-other")]
    record_start(SweepConfig(output_dir=str(runs), groups=groups, comparison=ComparisonProtocol(groups=["g"])))
    report = build_report(runs, allow_mixed=True).read_text()
    section = report[report.index("## The protocol's comparison") :].split("\n## ")[0]
    assert "`g`: one setting per head, fixed in the sweep config" in section and "randomisation test" in section
    (row,) = [r for r in start_rows(find_cells(runs)) if r.group == "g"]
    qnorm = row.heads["qnorm"].comparison
    assert f"qnorm {mark(qnorm) or 'no difference found'} ({difference_text(qnorm)})" in section
    assert "`g-other`" not in section  # a group the protocol does not compare is not in its section
    regime = report[report.index("## Regime") :].split("\n## ")[0]
    assert "significantly above cosine" in regime and " beat cosine" not in regime  # tested gains, not means


def test_a_sweep_without_a_declared_comparison_says_so(runs):
    report = build_report(runs, allow_mixed=True).read_text()
    assert "declares no comparison" in report[report.index("## The protocol's comparison") :]


def test_each_head_is_tested_against_its_own_start_and_the_table_reads_verdicts_within_the_margin(runs):
    """The untuned start is every table's row: a head's change from it is tested beside its
    difference from cosine, and with the protocol's margin each comparison reads a verdict."""
    for head in ("qnorm", "dnorm"):
        _cell(runs, "g-untuned", "start", head, 0, 0, 0.9)
    (row,) = [r for r in start_rows(find_cells(runs)) if r.group == "g"]
    start = row.untuned_per_query["qnorm"]
    qnorm = row.heads["qnorm"]
    expected = np.mean([np.mean([qnorm.per_query[s][q] for s in (0, 1, 2)]) - start[q] for q in QUERIES])
    assert qnorm.from_start.difference == pytest.approx(expected)
    assert qnorm.from_start.n_seeds == 3 and qnorm.from_start.p_two_level is not None
    groups = [SweepGroup(name=g, heads=["cosine", "qnorm", "dnorm"]) for g in ("g-untuned", "g")]
    protocol = ComparisonProtocol(groups=["g"], holm="table", margin=0.01, start_group="g-untuned")
    record_start(SweepConfig(output_dir=str(runs), groups=groups, comparison=protocol))
    report = build_report(runs, allow_mixed=True).read_text()
    section = report[report.index("## The protocol's comparison") :].split("\n## ")[0]
    assert "Equivalence: two one-sided tests within +-0.01" in section
    assert "change from its untuned start" in section
    assert section.count("MDE at this level") == 5  # two heads against cosine; three, cosine too, against their starts
    assert any(f"qnorm {word} (" in section for word in ("above", "below", "equivalent", "undecided"))
