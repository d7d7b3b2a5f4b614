"""Hybrid retrieval: BM25 fused with a dense run, checked against ranx's fusion and by hand.

Dense scores under dot-family heads are unbounded and scaled per query; the fusions either ignore
scores (RRF) or normalise them per query before summing, so the fused ranking must not change
when one run's scores of a query are multiplied by a positive number - which the last tests show.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from text_retrieval.data.loaders import RetrievalDataset
from text_retrieval.rag.retrieve import RetrieverRun, hybrid_run
from text_retrieval.retrieval.fusion import FUSIONS, RRF_K, fuse, hybrid_with_bm25

RANX_NORM = {"minmax": "min-max", "zscore": "zmuv"}


def _random_runs(seed: int) -> list[dict[str, dict[str, float]]]:
    """A dense-like run (unbounded scores, a different scale per query) and a BM25-like one, overlapping."""
    rng = np.random.default_rng(seed)
    runs = []
    for scale in (50.0, 8.0):
        run = {}
        for q in range(6):
            docs = rng.choice(40, size=15, replace=False)
            run[f"q{q}"] = {f"d{d}": float(rng.normal(0, scale * (q + 1))) for d in docs}
        runs.append(run)
    return runs


@pytest.mark.slow  # ranx compiles its numba kernels beside the installed package: about a minute per fresh .venv
@pytest.mark.parametrize("method", FUSIONS)
def test_fusions_equal_ranx(method):
    ranx = pytest.importorskip("ranx")
    runs = _random_runs(0)
    theirs = [ranx.Run(run, name=f"run{i}") for i, run in enumerate(runs)]
    if method == "rrf":
        expected = ranx.fuse(theirs, method="rrf", params={"k": RRF_K}).to_dict()
    else:
        expected = ranx.fuse(theirs, norm=RANX_NORM[method], method="sum").to_dict()
    ours = fuse(runs, method, depth=100)
    for qid, hits in expected.items():
        assert set(ours[qid]) == set(hits)
        assert ours[qid] == pytest.approx(dict(hits), abs=1e-12)
        assert list(ours[qid]) == sorted(hits, key=lambda d: (-hits[d], d))


def test_fusions_by_hand():
    dense = {"q": {"a": 3.0, "b": 2.0, "c": 1.0}}
    lexical = {"q": {"b": 10.0, "d": 5.0, "a": 1.0}}
    assert fuse([dense, lexical], "rrf", 10)["q"] == pytest.approx(
        {"b": 1 / 62 + 1 / 61, "a": 1 / 61 + 1 / 63, "d": 1 / 62, "c": 1 / 63}
    )
    assert fuse([dense, lexical], "minmax", 10)["q"] == pytest.approx({"b": 1.5, "a": 1.0, "d": 4 / 9, "c": 0.0})
    assert list(fuse([dense, lexical], "minmax", 2)["q"]) == ["b", "a"]
    flat = fuse([{"q": {"a": 2.0, "b": 2.0}}, lexical], "zscore", 10)["q"]  # no spread: the run adds nothing
    assert flat["a"] == pytest.approx((1 - 16 / 3) / np.std([10, 5, 1]))


@pytest.mark.parametrize("method", FUSIONS)
def test_a_query_scale_factor_does_not_change_the_fused_ranking(method):
    dense, lexical = _random_runs(1)
    scaled = {q: {d: s * (7.0 + i) for d, s in hits.items()} for i, (q, hits) in enumerate(dense.items())}
    before, after = fuse([dense, lexical], method, 20), fuse([scaled, lexical], method, 20)
    assert {q: list(h) for q, h in before.items()} == {q: list(h) for q, h in after.items()}


def test_unknown_fusion_is_refused():
    with pytest.raises(ValueError, match="fusion 'sum' unknown; valid: rrf, minmax, zscore"):
        fuse([{}], "sum", 10)


def test_beir_hybrid_searches_bm25_over_the_corpus_with_the_exclusions():
    dataset = RetrievalDataset(
        "toy",
        corpus_ids=["q1", "d1", "d2", "d3"],
        corpus_texts=["magnitude of embeddings", "norm of a vector", "embeddings magnitude norm", "cooking pasta"],
        queries={"q1": "embeddings magnitude"},
        qrels={"q1": {"d2": 1}},
        excluded={"q1": {"d3"}},
        ignore_identical_ids=True,
    )
    dense = {"q1": {"d1": 5.0, "d2": 1.0}}
    fused, described = hybrid_with_bm25(dense, dataset, "rrf", depth=3)
    assert set(fused["q1"]) == {"d1", "d2"}  # q1 (identical id) and d3 (excluded) never return
    assert list(fused["q1"]) == ["d2", "d1"]  # d2: BM25's only match; d1 shares no term: no BM25 credit
    assert described == {"fusion": "rrf", "with": {"bm25": described["with"]["bm25"]}, "depth": 3, "rrf_k": RRF_K}


def test_rag_hybrid_row_fuses_a_dense_row_with_the_bm25_row():
    dense = RetrieverRun(
        "qnorm", {"x": [("p1", 9.0), ("p2", 4.0)]}, {"head": {"name": "qnorm"}}, {"kind": "dense"}, 1.0
    )
    lexical = RetrieverRun("bm25", {"x": [("p2", 3.0), ("p3", 1.0)]}, None, {"kind": "bm25"}, 0.5)
    row = hybrid_run(dense, lexical, "minmax", depth=2)
    assert row.label == "qnorm+bm25-minmax" and row.head == dense.head
    assert row.rankings == {"x": [("p1", 1.0), ("p2", 1.0)]}  # tied at 1.0: by passage id
    assert row.description["fusion"] == "minmax" and row.seconds >= 1.5


def test_eval_text_flags_set_hybrid_and_compression_and_retrieve_fuses_the_dense_run():
    from clipmag.scoring.heads import build_head
    from text_retrieval.evaluation.cli import parse_args
    from text_retrieval.retrieval.index import RetrievalSettings
    from text_retrieval.retrieval.search import retrieve

    cfg = parse_args(["--model", "m", "--data", "d", "--hybrid", "zscore", "--compress", "int8+norm"])
    assert (cfg.retrieval.hybrid, cfg.retrieval.compression) == ("zscore", "int8+norm")
    dataset = RetrievalDataset(
        "toy", ["d0", "d1", "d2"], ["red fruit apples", "green pears", "red wine"], {"q": "red fruit"}, {"q": {"d0": 1}}
    )
    docs = np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 1.0]], dtype=np.float32)
    queries = np.array([[0.0, 1.0]], dtype=np.float32)
    head = build_head("dot")
    dense, _ = retrieve(docs, queries, dataset, head, 3)
    fused, searched = retrieve(docs, queries, dataset, head, 3, RetrievalSettings(hybrid="zscore"))
    lexical, _ = hybrid_with_bm25(dense, dataset, "zscore", 3)
    assert fused == lexical and searched["hybrid"]["fusion"] == "zscore"
    assert list(dense["q"]) == ["d1", "d2", "d0"] and list(fused["q"]) == ["d1", "d0", "d2"]  # BM25: d0 over d2


def test_rag_evaluation_adds_each_dense_rows_fusions_after_it(tiny_rag_files, tmp_path):
    from text_fixtures import minilm_path

    from text_retrieval.rag.config import RagConfig, RagDataConfig, RagHeads, ReaderConfig, RetrievalConfig
    from text_retrieval.rag.pipeline import run_rag

    data = RagDataConfig(corpus=str(tiny_rag_files[0]), qa=[str(tiny_rag_files[1])])
    retrieval = RetrievalConfig(models=[minilm_path()], max_length=64, cache_dir=None, depth=8)
    retrieval.hybrid = ["rrf", "zscore"]
    reader = ReaderConfig(name_or_path="none", cache="")
    cfg = RagConfig(data, retrieval, RagHeads(name=["qnorm"]), reader, str(tmp_path / "out"))
    rows = run_rag(cfg, show_progress=False)
    assert [row.label for row in rows] == ["qnorm", "qnorm+bm25-rrf", "qnorm+bm25-zscore"]  # no BM25 row unasked
    fused = json.loads((tmp_path / "out" / "qnorm_bm25-rrf" / "results.json").read_text(encoding="utf-8"))
    assert fused["retriever"]["kind"] == "hybrid" and fused["retriever"]["fusion"] == "rrf"
    assert fused["head"]["head"] == {"name": "qnorm"} and rows[1].head == "qnorm"
