"""The serving benchmarks on a small corpus: ``bench_ann_trained.py measure`` over exports of a tiny
random BERT (a qnorm one and a learnable one with gammas away from the corners) writes a record
of every head, store, index and knob, resumes from its parts, and renders into docs/deploy.md;
``bench_serving.py`` times every head beside each store's cosine index and resumes from its parts.
Their numbers on 300 documents mean nothing; the checks are of what they must satisfy."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml
from text_fixtures import REPO, write_tiny_bert

from clipmag.scoring.heads import build_head
from clipmag_experiments.manuals.serving import ann_trained_table, serving_speed_table
from text_retrieval.model.encoder import TextEncoder

STORES = {"faiss": {"hnsw": [16], "ivf": [1, 64]}, "lancedb": {"IVF_FLAT": [None]}, "qdrant-local": {"exact": [None]}}


def _run(script: str, *argv: str) -> str:
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / script), *argv],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A runs folder holding two exports as bench_ann_trained.py's train step leaves them, and the bare BERT."""
    runs = tmp_path_factory.mktemp("ann_trained")
    bert = write_tiny_bert(runs / "bert")
    for name, settings in {"qnorm": {}, "learnable": {"gq": 0.3, "gd": 0.7}}.items():
        encoder = TextEncoder.from_pretrained(str(bert), head=build_head(name, **settings), precision="fp32")
        encoder.save_pretrained(runs / name / "export")
    return runs


@pytest.mark.slow
def test_trained_recall_covers_every_store_and_resumes_from_its_parts(runs):
    config = {"runs": str(runs), "documents": 300, "queries": 20, "max_length": 32, "control": str(runs / "bert")}
    config.update(exports={"qnorm": ["--norm", "qnorm"], "learnable": ["--norm", "learnable"]}, stores=STORES)
    (runs / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    argv = ["measure", "--config", str(runs / "config.yaml"), "--output", str(runs / "record.json")]
    _run("bench_ann_trained.py", *argv)
    record = json.loads((runs / "record.json").read_text(encoding="utf-8"))
    assert record["benchmark"] == "ann_trained" and record["cpu"] and record["corpus"]["documents"] == 300
    learnable = next(m for m in record["models"] if m["label"] == "learnable")
    assert learnable["trained"] and learnable["head"]["gq"] == pytest.approx(0.3)
    heads = {(r["model"], r["head"]) for r in record["rows"]}
    assert {("qnorm", "qnorm"), ("qnorm", "cosine"), ("learnable", "learnable"), ("bert", "dnorm")} <= heads
    by = {(r["model"], r["head"], r["layout"], r["store"], r["index"], r["value"]): r for r in record["rows"]}
    assert by[("qnorm", "qnorm", "ip", "qdrant-local", "exact", None)]["recall"] == 1.0  # local mode scans
    assert by[("qnorm", "qnorm", "ip", "faiss", "ivf", 64)]["recall"] == 1.0  # every list probed: exact
    assert ("qnorm", "qnorm", "mips-l2", "lancedb", "IVF_FLAT", None) not in by  # faiss alone holds the reduction
    assert by[("learnable", "learnable", "mips-l2", "faiss", "hnsw", 16)]["gd"] == pytest.approx(0.7)
    defaults = [r for r in record["rows"] if r["store"] == "faiss" and r["index"] == "ivf" and r["default"]]
    assert defaults and all(r["value"] == 1 for r in defaults)  # ann.py: ceil(7 lists / 8) at 300 documents
    assert "| learnable | learnable | ip | lancedb | IVF_FLAT | nprobes | default:" in ann_trained_table(record)
    again = _run("bench_ann_trained.py", *argv)
    assert again.count("measured already") == 3
    assert json.loads((runs / "record.json").read_text(encoding="utf-8"))["rows"] == record["rows"]


@pytest.mark.slow
def test_serving_speed_times_every_head_beside_the_stores_cosine_index(runs, tmp_path):
    output = tmp_path / "speed.json"
    argv = ["--docs", "300", "--queries", "20", "--latency-queries", "5", "--rounds", "2", "--max-length", "32"]
    argv += ["--export", str(runs / "learnable" / "export"), "--cache-dir", str(tmp_path / "cache")]
    argv += ["--parts", str(tmp_path / "parts"), "--indexes", "faiss:flat", "qdrant-local:exact"]
    _run("bench_serving.py", *argv, "--output", str(output))
    record = json.loads(output.read_text(encoding="utf-8"))
    sides = [(r["store"], r["side"]) for r in record["rows"]]
    heads = ["cosine index", "cosine", "dot", "qnorm", "dnorm", "learnable"]
    assert sides == [("faiss", side) for side in heads] + [("qdrant-local", side) for side in heads]
    for row in record["rows"]:
        assert row["qps"] > 0 and 0 < row["p50_ms"] <= row["p99_ms"] and len(row["rounds"]) == 2
        assert ("qps_vs_peer" in row) == (row["side"] != "cosine index")
    assert record["heads"]["learnable"]["gd"] == pytest.approx(0.7)
    assert "| qdrant-local | exact | learnable |" in serving_speed_table(record)
    again = _run("bench_serving.py", *argv, "--output", str(output))
    assert again.count("measured already") == 2  # each store's part, kept as it finished
    assert json.loads(output.read_text(encoding="utf-8"))["rows"] == record["rows"]
