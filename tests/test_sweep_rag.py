"""A sweep attaches the RAG evaluation to its text cells; the report tests heads over questions."""

from __future__ import annotations

import json

import numpy as np
import pytest
import toy_frontend
from text_fixtures import minilm_encoder

from clipmag.registry.front_ends import FRONT_ENDS, FrontEnd
from clipmag.results.significance import holm, paired_query_p
from clipmag_experiments.report import build_report
from clipmag_experiments.report.collect import evaluation_rows, find_cells
from clipmag_experiments.report.tables import aggregate, with_query_tests
from clipmag_experiments.sweep import run as sweep

HEADS = ["cosine", "dot", "qnorm"]


@pytest.fixture
def text_cells_with_exports(monkeypatch):
    """The toy trainer under the ``text`` kind, writing a real MiniLM export with the cell's head."""
    monkeypatch.setitem(FRONT_ENDS, "text", FrontEnd("text", "toy_frontend"))
    monkeypatch.setattr(toy_frontend, "EXPORT", [lambda folder, head: minilm_encoder(head).save_pretrained(folder)])
    toy_frontend.CALLS.clear()
    toy_frontend.FAIL_ON.clear()


def _config(tmp_path, files) -> sweep.SweepConfig:
    corpus, qa = files
    rag = sweep.SweepEvaluation(
        kind="rag",
        args=["--corpus", str(corpus), "--qa", str(qa), "--reader", "none", "--max-length", "64", "--quiet"]
        + ["retrieval.depth=8", f"retrieval.cache_dir={tmp_path / 'cache'}"],
    )
    group = sweep.SweepGroup(name="qa", kind="text", heads=HEADS, seeds=[0, 1], evaluations=[rag])
    return sweep.SweepConfig(output_dir=str(tmp_path / "runs"), groups=[group])


def _outcomes(cell_dir, metric: str) -> dict[str, float]:
    path = cell_dir / "evaluations" / "rag" / "tiny.questions.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    k = int(metric.split("@")[1])
    return {r["id"]: float(r["first_hit_rank"] is not None and r["first_hit_rank"] <= k) for r in records}


def test_sweep_runs_rag_on_every_export_and_reports_a_paired_test_over_questions(
    tmp_path, tiny_rag_files, text_cells_with_exports
):
    cfg = _config(tmp_path, tiny_rag_files)
    evaluations, cfg.groups[0].evaluations = cfg.groups[0].evaluations, []
    sweep.run_sweep(cfg)  # the cells alone
    cfg.groups[0].evaluations = evaluations
    cells = sweep.run_sweep(cfg)  # evaluations added afterwards run on the finished cells' exports
    assert len(toy_frontend.CALLS) == len(cells)  # no cell trained twice
    results = {c.label: c.evaluation_folder(c.evaluations[0]) / "results.json" for c in cells}
    assert all(path.is_file() for path in results.values())
    record = json.loads(results["qa/qnorm/seed0"].read_text())
    assert record["head"]["head"]["name"] == "qnorm"  # the export's own head retrieved

    stamps = {label: path.stat().st_mtime_ns for label, path in results.items()}
    sweep.run_sweep(cfg)  # a rerun skips finished cells and finished evaluations
    assert {label: path.stat().st_mtime_ns for label, path in results.items()} == stamps

    rows, outcomes = evaluation_rows(find_cells(cfg.output_dir))
    table = {r.metric: r for r in with_query_tests(aggregate(rows, ("accuracy@1", "accuracy@5")), outcomes)}
    run = tmp_path / "runs" / "qa" / "default"
    for metric in ("accuracy@1", "accuracy@5"):
        per_head = {h: [_outcomes(run / h / f"seed{s}", metric) for s in (0, 1)] for h in HEADS}
        assert per_head["qnorm"] == per_head["dot"]  # qnorm ranks as dot
        questions = sorted(per_head["cosine"][0])
        means = {h: [np.mean([seed[q] for seed in per_head[h]]) for q in questions] for h in HEADS}
        cell = table[metric].cells["dot"]
        assert cell.mean == pytest.approx(np.mean(means["dot"]))
        raw = {h: paired_query_p(means[h], means["cosine"]) for h in HEADS if h != "cosine"}
        assert cell.comparison.p == pytest.approx(raw["dot"])
        assert cell.comparison.p_holm == pytest.approx(dict(zip(raw, holm(list(raw.values()))))["dot"])
    report = build_report(cfg.output_dir, allow_mixed=True).read_text()
    assert "## Evaluations of the exports (RAG)" in report and "| qa | rag: tiny | accuracy@5 |" in report


def test_attached_evaluations_are_checked(tmp_path):
    rag = sweep.SweepEvaluation(kind="rag")
    clip = sweep.SweepGroup(name="pictures", kind="clip", evaluations=[rag])
    with pytest.raises(ValueError, match="group 'pictures': a 'rag' evaluation needs a text group, not 'clip'"):
        sweep.expand(sweep.SweepConfig(groups=[clip]))
    unknown = sweep.SweepGroup(name="g", kind="text", evaluations=[sweep.SweepEvaluation(kind="squad")])
    with pytest.raises(ValueError, match=r"unknown evaluation kind 'squad'; valid: .*\brag\b"):
        sweep.expand(sweep.SweepConfig(groups=[unknown]))
    twice = sweep.SweepGroup(name="g", kind="text", evaluations=[rag, sweep.SweepEvaluation(kind="rag")])
    with pytest.raises(ValueError, match="evaluation names repeat"):
        sweep.expand(sweep.SweepConfig(groups=[twice]))
