"""The serving docs: every export's card names the metric per engine for its head, docs/deploy.md
names the same settings, and the deploy measurements render into the page's table blocks."""

from __future__ import annotations

import json

import pytest
from text_fixtures import REPO

from clipmag.scoring.head_record import HeadRecord
from clipmag_experiments.manuals.deploy import BLOCKS, VALUES
from clipmag_experiments.manuals.serving import BLOCKS as SERVING_BLOCKS
from clipmag_experiments.manuals.serving import VALUES as SERVING_VALUES
from clipmag_experiments.manuals.sync import docs_main, stale_marks
from clipmag_experiments.report.stored import StoredResults
from text_retrieval.model.card import write_model_card
from text_retrieval.model.serving_card import ENGINE_SETTINGS

DEPLOY = REPO / "docs" / "deploy.md"
# each engine's inner-product setting, the one every head can be served with
INNER_PRODUCT = {
    "faiss": "METRIC_INNER_PRODUCT",
    "Qdrant": '"distance": "Dot"',
    "Milvus": 'metric_type="IP"',
    "pgvector": "vector_ip_ops",
    "LanceDB": 'distance_type("dot")',
    "Elasticsearch": '"similarity": "max_inner_product"',
    "OpenSearch": '"space_type": "innerproduct"',
    "Vespa": "distance-metric: dotproduct",
}


@pytest.mark.parametrize("head", [{"name": "qnorm"}, {"name": "learnable", "gq": 0.3, "gd": 0.7}])
def test_card_of_a_norm_ranking_head_names_only_inner_product_settings(tmp_path, head):
    card = write_model_card(tmp_path, HeadRecord(head=head)).read_text(encoding="utf-8")
    section = card[card.index("## Serving in a vector database") :]
    for engine, setting in INNER_PRODUCT.items():
        row = next(line for line in section.splitlines() if line.startswith(f"| {engine} |"))
        assert setting in row and "cosine" not in row.lower().replace("cosine collection", "")
    assert "throws that norm away" in section and "`dot_product` refuses" in section
    assert "HNSW" in section and "0.997" in section  # the ANN caveat with clipmag's own figures


def test_card_of_a_unit_document_head_allows_cosine_too(tmp_path):
    card = write_model_card(tmp_path, HeadRecord(head={"name": "dnorm"})).read_text(encoding="utf-8")
    assert "cosine and inner product rank alike" in card and "the factor |q|" in card
    assert '`"distance": "Dot"`, or `"distance": "Cosine"`' in card


def test_deploy_page_names_every_engines_settings_and_is_linked():
    page = DEPLOY.read_text(encoding="utf-8")
    assert set(INNER_PRODUCT) == set(ENGINE_SETTINGS)
    for engine, setting in INNER_PRODUCT.items():
        row = next(line for line in page.splitlines() if line.startswith(f"| {engine} |"))
        assert setting in row, engine
    assert "docs/deploy.md" in (REPO / "README.md").read_text(encoding="utf-8")


def _compression_record() -> dict:
    rows = []
    for head, base in (("cosine", 0.6), ("qnorm", 0.5)):
        for spec, value, size in (("none", base, 1536), ("binary", base - 0.1, 48), ("binary+norm", base - 0.05, 52)):
            rows.append({"dataset": "scifact", "model": "all-MiniLM-L6-v2", "head": head, "compression": spec})
            rows[-1].update(ndcg10=value, bytes_per_vector=size)
    return _record("compression", rows)


def _record(table: str, rows: list[dict]) -> dict:
    code = {"commit": "0123456789abcdef0123", "dirty": False, "diff_sha256": None, "reason": None}
    command = {"argv": [f"results/deploy/measure_{table}.py"], "cwd": "/x"}
    provenance = {"code": code, "command": command, "recorded": "2026-12-03T12:00:00"}
    numerics = {"device": "cpu", "torch_threads": 16, "autocast": "fp32"}
    return {"table": table, "provenance": provenance, "numerics": numerics, "rows": rows}


def _store(tmp_path, record: dict) -> StoredResults:
    folder = tmp_path / "results" / "deploy"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{record['table']}.json").write_text(json.dumps(record), encoding="utf-8")
    return StoredResults(tmp_path / "results")


def test_measurements_render_into_the_pages_blocks(tmp_path):
    text = DEPLOY.read_text(encoding="utf-8")
    assert "python results/deploy/measure_compression.py" in text and "python results/deploy/measure_hybrid.py" in text
    stored = _store(tmp_path, _compression_record())
    table = BLOCKS["deploy-compression"](stored)
    assert "| scifact | all-MiniLM-L6-v2 | qnorm | 0.5000 | 0.4000 / 0.4500 |" in table
    assert "| all-MiniLM-L6-v2 | 1536 | 48 / 52 |" in table
    assert "commit 0123456789ab" in table and "`python results/deploy/measure_compression.py`" in table
    page = tmp_path / "deploy.md"
    page.write_text("# Deploy\n\n<!-- results:deploy-compression -->\nstale\n<!-- /results:deploy-compression -->\n")
    assert [m.name for m in stale_marks([page], stored)] == ["deploy-compression"]
    docs_main(["--files", str(page), "--results", str(tmp_path / "results")])
    assert table in page.read_text(encoding="utf-8") and stale_marks([page], stored) == []


def test_hybrid_rows_render_with_bm25_alone(tmp_path):
    rows = [{"dataset": "scifact", "model": "bm25", "head": None, "fusion": "bm25", "ndcg10": 0.66}]
    for fusion, value in (("none", 0.64), ("rrf", 0.67), ("minmax", 0.68), ("zscore", 0.69)):
        rows.append({"dataset": "scifact", "model": "m", "head": "qnorm", "fusion": fusion, "ndcg10": value})
        rows.append({"dataset": "rag-bundled", "model": "m", "head": "qnorm", "fusion": fusion})
        rows[-1].update({"accuracy@5": value - 0.1, "accuracy@20": value})
    table = BLOCKS["deploy-hybrid"](_store(tmp_path, _record("hybrid", rows)))
    assert "| scifact | m | qnorm | 0.6400 | 0.6700 | 0.6800 | 0.6900 |" in table
    assert "| rag-bundled | m | qnorm | 0.540 / 0.640 |" in table and "BM25 alone: scifact 0.6600." in table


def test_a_measurement_of_another_table_is_refused(tmp_path):
    stored = _store(tmp_path, _compression_record())
    (stored.root / "deploy" / "hybrid.json").write_text(json.dumps(_compression_record()), encoding="utf-8")
    with pytest.raises(ValueError, match=r"hybrid.json: holds the 'compression' table, not 'hybrid'"):
        BLOCKS["deploy-hybrid"](stored)


def _ann_scale_record(recalls: dict[tuple[str, str], list[float]]) -> dict:
    """A bench_ann_scale.py record whose HNSW rows at efSearch 16, 64, 256 have the given recalls."""
    rows = []
    for (head, layout), values in recalls.items():
        for value, recall in zip((16, 64, 256), values):
            rows.append({"head": head, "layout": layout, "method": "hnsw", "knob": "efSearch", "value": value})
            rows[-1].update(recall=recall, M=32, efConstruction=40, build_s=1.0)
        rows.append({"head": head, "layout": layout, "method": "ivf", "knob": "nprobe", "value": 4})
        rows[-1].update(recall=0.5, nlist=1264, build_s=1.0)
    code = {"commit": "0123456789abcdef0123", "dirty": False}
    corpus = {"documents": 100_000, "queries": 1_000}
    settings = {"docs": 100_000, "queries": 1_000, "max_length": 128}
    record = {"benchmark": "ann_scale", "cpu": "AMD EPYC", "threads": 2, "settings": settings, "code": code}
    return {**record, "model": "all-MiniLM-L6-v2", "corpus": corpus, "k": 10, "rows": rows}


def test_ann_scale_table_and_its_advice_render_from_the_record(tmp_path):
    recalls = {
        ("cosine", "ip"): [0.96, 0.99, 1.0],
        ("dot", "ip"): [0.90, 0.97, 1.0],
        ("qnorm", "ip"): [0.90, 0.96, 1.0],
        ("dot", "mips-l2"): [0.80, 0.90, 0.94],
    }
    root = tmp_path / "results"
    (root / "deploy").mkdir(parents=True)
    (root / "deploy" / "ann_scale.json").write_text(json.dumps(_ann_scale_record(recalls)), encoding="utf-8")
    stored = StoredResults(root)
    table = BLOCKS["deploy-ann-scale"](stored)
    assert "| dot | ip | 0.900 | 0.970 | 1.000 | 0.500 |" in table and "100,000 functions" in table
    assert "HNSW efSearch 16 | HNSW efSearch 64 | HNSW efSearch 256 | IVF nprobe 4 |" in table
    assert "`python benchmarks/bench_ann_scale.py --docs 100000 --queries 1000`" in table and "AMD EPYC" in table
    assert VALUES["ann-scale-knob"](stored, "hnsw/ip") == "efSearch 64"  # every dot-family head at 0.95
    assert VALUES["ann-scale-knob"](stored, "hnsw/cosine") == "efSearch 16"
    assert VALUES["ann-scale-knob"](stored, "hnsw/mips-l2") == "no efSearch measured (largest 256)"


def test_ann_scale_blocks_say_how_to_measure_before_the_record_exists(tmp_path):
    stored = StoredResults(tmp_path / "results")
    assert "not measured yet (`python benchmarks/bench_ann_scale.py --output results/deploy/ann_scale.json`" in (
        BLOCKS["deploy-ann-scale"](stored)
    )
    assert VALUES["ann-scale-knob"](stored, "ivf/ip") == "(not measured yet)"


def _trained_record() -> dict:
    """A bench_ann_trained.py record: a qnorm export (own head and cosine) and the untrained control."""
    rows = []
    for model, head, gd, recalls in (
        ("qnorm", "qnorm", 0.0, (0.80, 0.96, 0.99)),
        ("qnorm", "cosine", 1.0, (0.90, 0.99, 1.0)),
        ("all-MiniLM-L6-v2", "dot", 0.0, (0.5, 0.6, 0.7)),
    ):
        for value, recall in zip((16, 128, 256), recalls):
            rows.append({"model": model, "head": head, "gq": 1.0, "gd": gd, "store": "faiss", "index": "hnsw"})
            rows[-1].update(layout="ip", knob="efSearch", value=value, default=value == 128, recall=recall)
        rows.append({"model": model, "head": head, "gq": 1.0, "gd": gd, "store": "faiss", "index": "ivf"})
        rows[-1].update(layout="ip", knob="nprobe", value=158, default=True, recall=recalls[0] + 0.05)
        rows.append({"model": model, "head": head, "gq": 1.0, "gd": gd, "store": "lancedb", "index": "IVF_PQ"})
        rows[-1].update(layout="ip", knob="nprobes", value=None, default=True, recall=0.79)
    models = [
        {"label": "all-MiniLM-L6-v2", "trained": False, "head": {"name": "cosine"}, "weights": "a"},
        {"label": "qnorm", "trained": True, "head": {"name": "qnorm"}, "weights": "b"},
    ]
    settings = {"docs": 100_000, "queries": 1_000, "max_length": 128}
    code = {"commit": "0123456789abcdef0123", "dirty": False}
    corpus = {"documents": 100_000, "queries": 1_000}
    record = {"benchmark": "ann_trained", "cpu": "AMD EPYC", "threads": 2, "settings": settings, "code": code}
    return {**record, "models": models, "corpus": corpus, "k": 10, "rows": rows}


def _speed_record() -> dict:
    rows = [{"store": "faiss", "index": "hnsw", "side": "cosine index", "qps": 900.0, "p50_ms": 1.0, "p99_ms": 2.0}]
    rows.append({"store": "faiss", "index": "hnsw", "side": "qnorm", "qps": 450.0, "p50_ms": 2.0, "p99_ms": 5.0})
    rows[-1].update(qps_vs_peer=0.5, p99_vs_peer=2.5)
    rows.append({"store": "faiss", "index": "hnsw", "side": "cosine", "qps": 880.0, "p50_ms": 1.0, "p99_ms": 2.1})
    rows[-1].update(qps_vs_peer=0.98, p99_vs_peer=1.05)
    per_round = {"cosine index": [900, 1000], "qnorm": [450, 850], "cosine": [880, 900]}
    for row in rows:
        row["build_s"] = 12.0
        row["rounds"] = [{"qps": q, "p99_ms": row["p99_ms"]} for q in per_round[row["side"]]]
    settings = {"docs": 100_000, "queries": 1_000, "latency_queries": 200, "rounds": 3}
    code = {"commit": "0123456789abcdef0123", "dirty": False}
    record = {"benchmark": "serving_speed", "cpu": "AMD EPYC", "threads": 2, "settings": settings, "code": code}
    return {
        **record,
        "model": "all-MiniLM-L6-v2",
        "corpus": {"documents": 100_000, "queries": 1_000},
        "k": 10,
        "rows": rows,
    }


def _benchmark_store(tmp_path, *records: dict) -> StoredResults:
    folder = tmp_path / "results" / "deploy"
    folder.mkdir(parents=True, exist_ok=True)
    for record in records:
        (folder / f"{record['benchmark']}.json").write_text(json.dumps(record), encoding="utf-8")
    return StoredResults(tmp_path / "results")


def test_trained_recall_and_its_advice_render_from_the_record(tmp_path):
    stored = _benchmark_store(tmp_path, _trained_record())
    table = SERVING_BLOCKS["deploy-ann-trained"](stored)
    assert "| qnorm | qnorm | ip | faiss | hnsw | efSearch | 16: 0.800, 128*: 0.960, 256: 0.990 |" in table
    assert "| qnorm | qnorm | ip | lancedb | IVF_PQ | nprobes | default: 0.790 |" in table
    assert "exports qnorm (qnorm); control all-MiniLM-L6-v2 (untrained)" in table and "AMD EPYC" in table
    assert SERVING_VALUES["ann-trained-knob"](stored, "hnsw/ip") == "efSearch 128"  # the control's rows do not count
    assert SERVING_VALUES["ann-trained-knob"](stored, "hnsw/cosine") == "efSearch 128"
    assert SERVING_VALUES["ann-ivf-default"](stored, "ip") == "nprobe 158: qnorm 0.850"
    assert SERVING_VALUES["ann-trained-pq"](stored, "") == "qnorm 0.790 (its cosine 0.790)"  # not the control's


def test_serving_speed_renders_each_side_with_its_ratio_to_the_cosine_index(tmp_path):
    table = SERVING_BLOCKS["deploy-serving-speed"](_benchmark_store(tmp_path, _speed_record()))
    assert "| faiss | hnsw | qnorm | 12.0 | 450 | 2.00 | 5.00 | 0.50 | 2.50 |" in table
    assert "| faiss | hnsw | cosine index | 12.0 | 900 | 1.00 | 2.00 | - | - |" in table
    assert "`python benchmarks/bench_serving.py --docs 100000 --queries 1000`" in table


def test_serving_speed_is_read_against_the_cosine_head_as_control(tmp_path):
    stored = _benchmark_store(tmp_path, _speed_record())
    reading = SERVING_BLOCKS["deploy-serving-reading"](stored)
    # qnorm's per-round QPS ratios 0.50 and 0.85 both lie below the control's 0.90 and 0.98
    assert "* faiss hnsw: control QPS 0.90-0.98, p99 1.05-1.05; qnorm QPS 0.50-0.85, below the control's" in reading
    assert "p99 2.50-2.50, above the control's." in reading
    record = _speed_record()
    record["rows"][1]["rounds"][1]["qps"] = 950  # its second round overlaps the control's range
    reading = SERVING_BLOCKS["deploy-serving-reading"](_benchmark_store(tmp_path, record))
    assert "qnorm QPS 0.50-0.95, within the control's, p99 2.50-2.50, above the control's." in reading


def test_serving_blocks_say_how_to_measure_before_their_records_exist(tmp_path):
    stored = StoredResults(tmp_path / "results")
    assert "not measured yet (`python benchmarks/bench_serving.py --output" in SERVING_BLOCKS["deploy-serving-speed"](
        stored
    )
    assert "not measured yet" in SERVING_BLOCKS["deploy-ann-trained"](stored)
    assert SERVING_VALUES["ann-trained-knob"](stored, "ivf/ip") == "(not measured yet)"


def test_the_fp32_baseline_says_whether_both_records_share_one_score(tmp_path):
    compression = _compression_record()
    hybrid_rows = [
        {"dataset": r["dataset"], "model": r["model"], "head": r["head"], "fusion": "none", "ndcg10": r["ndcg10"]}
        for r in compression["rows"]
        if r["compression"] == "none"
    ]
    hybrid_rows.append({"dataset": "rag-bundled", "model": "m", "head": "qnorm", "fusion": "none", "accuracy@5": 0.5})
    _store(tmp_path, compression)
    stored = _store(tmp_path, _record("hybrid", hybrid_rows))
    assert VALUES["deploy-fp32-baseline"](stored, "") == "the same fp32 nDCG@10 in both records (all 2 rows)"
    hybrid_rows[1]["ndcg10"] += 0.0027
    stored = _store(tmp_path, _record("hybrid", hybrid_rows))
    assert VALUES["deploy-fp32-baseline"](stored, "") == (
        "up to 0.0027 apart (scifact / all-MiniLM-L6-v2 / qnorm: 0.5027 in hybrid.json, 0.5000 in compression.json; "
        "1 of 2 rows differ)"
    )
