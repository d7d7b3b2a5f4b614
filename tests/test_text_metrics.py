"""Metrics against pytrec_eval called directly, TREC run files, exclusions, and exact head-aware search."""

from __future__ import annotations

import numpy as np
import pytest
import pytrec_eval
import torch
from text_fixtures import CRANFIELD, require

from clipmag.scoring.heads import build_head
from text_retrieval.evaluation.metrics import drop_excluded, evaluate_run, read_trec_run, truncate_run, write_trec_run
from text_retrieval.retrieval.corpus_cache import encode_corpus
from text_retrieval.retrieval.index import RetrievalSettings
from text_retrieval.retrieval.search import build_index, search


def _random_run(qrels, doc_ids, rng, depth=150):
    return {
        q: {
            d: float(s)
            for d, s in zip(rng.choice(doc_ids, size=min(depth, len(doc_ids)), replace=False), rng.random(depth))
        }
        for q in qrels
    }


def _direct_means(qrels, run):
    measures = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.100", "map_cut.100"}).evaluate(run)
    top10 = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(truncate_run(run, 10))
    mean = lambda res, key: float(np.mean([v[key] for v in res.values()]))  # noqa: E731
    return {
        "NDCG@10": mean(measures, "ndcg_cut_10"),
        "Recall@100": mean(measures, "recall_100"),
        "MAP@100": mean(measures, "map_cut_100"),
        "MRR@10": mean(top10, "recip_rank"),
    }


def test_graded_synthetic_qrels_match_pytrec_eval():
    rng = np.random.default_rng(0)
    docs = [f"d{i}" for i in range(300)]
    qrels = {f"q{i}": {d: int(rng.integers(0, 4)) for d in rng.choice(docs, size=12, replace=False)} for i in range(40)}
    run = _random_run(qrels, docs, rng)
    mean, per_query = evaluate_run(qrels, run)
    assert set(per_query) == set(qrels)
    for key, value in _direct_means(qrels, run).items():
        assert mean[key] == pytest.approx(value, abs=1e-12), key


def test_cranfield_graded_qrels_match_pytrec_eval():
    from text_retrieval.data.loaders import load_beir

    ds = load_beir(require(CRANFIELD))
    run = _random_run(ds.qrels, ds.corpus_ids, np.random.default_rng(1), depth=400)
    # plant judged documents at the top so the graded gains actually matter
    for qid, judged in ds.qrels.items():
        for rank, doc in enumerate(sorted(judged, key=judged.get, reverse=True)[:5]):
            run[qid][doc] = 10.0 - rank
    mean, _ = evaluate_run(ds.qrels, run)
    for key, value in _direct_means(ds.qrels, run).items():
        assert mean[key] == pytest.approx(value, abs=1e-12), key
    assert mean["NDCG@10"] > 0.3


def test_mrr_is_cut_at_ten():
    qrels = {"a": {"rel": 1}, "b": {"rel": 1}}
    others = {f"x{i}": 100.0 - i for i in range(20)}
    run = {"a": {**others, "rel": 100.0 - 2.5}, "b": {**others, "rel": 100.0 - 10.5}}
    mean, per_query = evaluate_run(qrels, run)
    assert per_query["a"]["MRR@10"] == pytest.approx(1 / 4)
    assert per_query["b"]["MRR@10"] == 0.0  # rank 12: beyond the cut
    assert mean["MRR@10"] == pytest.approx(1 / 8)


def test_drop_excluded_and_identical_ids():
    run = {"q1": {"q1": 9.0, "d1": 5.0, "d2": 4.0}, "q2": {"d1": 3.0, "d3": 1.0}}
    assert drop_excluded(run, ignore_identical_ids=True)["q1"] == {"d1": 5.0, "d2": 4.0}
    assert drop_excluded(run, {"q2": ["d1"]})["q2"] == {"d3": 1.0}
    assert drop_excluded(run)["q1"] == run["q1"]


def test_trec_run_round_trip(tmp_path):
    rng = np.random.default_rng(2)
    run = {f"q{i}": {f"d{j}": float(rng.normal()) for j in range(30)} for i in range(5)}
    path = write_trec_run(run, tmp_path / "run.trec", tag="my model")
    first = path.read_text().splitlines()[0].split()
    assert first[1] == "Q0" and first[3] == "1" and first[5] == "my_model"
    assert read_trec_run(path) == run
    (tmp_path / "bad.trec").write_text("q1 Q0 d1 1 0.5\n")
    with pytest.raises(ValueError, match=r"bad\.trec, line 1: expected 'qid Q0 docid rank score tag'"):
        read_trec_run(tmp_path / "bad.trec")


def _vectors(n, dim, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, dim, generator=g)
    return (x * torch.empty(n, 1).uniform_(0.2, 5.0, generator=g)).numpy()


@pytest.mark.parametrize("norm", ["cosine", "dot", "qnorm", "dnorm"])
def test_faiss_search_matches_brute_force_head_scores(norm):
    head = build_head(norm)
    docs, queries = _vectors(500, 16, 0), _vectors(20, 16, 1)
    doc_ids, qids = [f"d{i}" for i in range(500)], [f"q{i}" for i in range(20)]
    run = search(build_index(docs, head), queries, qids, doc_ids, head, top_k=25)
    scores = head.score(torch.from_numpy(queries), torch.from_numpy(docs))
    top = scores.topk(25, dim=1)
    for row, qid in enumerate(qids):
        assert list(run[qid]) == [doc_ids[i] for i in top.indices[row]]
        np.testing.assert_allclose(list(run[qid].values()), top.values[row].numpy(), rtol=1e-5, atol=1e-5)


def test_ranking_depends_only_on_document_side():
    """docs/method.md Prop. 4.1: qnorm ranks as dot, dnorm ranks as cosine."""
    docs, queries = _vectors(400, 16, 3), _vectors(30, 16, 4)
    doc_ids, qids = [f"d{i}" for i in range(400)], [f"q{i}" for i in range(30)]
    runs = {
        n: search(build_index(docs, build_head(n)), queries, qids, doc_ids, build_head(n), top_k=50)
        for n in ("cosine", "dot", "qnorm", "dnorm")
    }
    for qid in qids:
        assert list(runs["qnorm"][qid]) == list(runs["dot"][qid])
        assert list(runs["dnorm"][qid]) == list(runs["cosine"][qid])
        assert list(runs["dot"][qid]) != list(runs["cosine"][qid])


def test_search_refills_top_k_after_exclusions():
    head = build_head("dot")
    docs = _vectors(50, 8, 5)
    doc_ids = [f"d{i}" for i in range(49)] + ["q0"]
    queries = docs[[49, 3]] * 3  # q0 is its own best hit
    run = search(
        build_index(docs, head),
        queries,
        ["q0", "q1"],
        doc_ids,
        head,
        top_k=10,
        excluded={"q1": {"d3", "d4"}},
        ignore_identical_ids=True,
    )
    assert len(run["q0"]) == len(run["q1"]) == 10
    assert "q0" not in run["q0"] and not {"d3", "d4"} & set(run["q1"])


class _CountingEncoder:
    """Just enough of TextEncoder for the corpus cache."""

    def __init__(self):
        self.calls, self.dim = 0, 4
        self.name_or_path, self.pooling, self.document_prefix, self.document_max_length = "fake/model", "mean", "", 16
        self.precision, self.device = "fp32", torch.device("cpu")

    def weights_fingerprint(self):
        return "w0"

    def encode(self, texts, side, batch_size=64, show_progress=True):
        self.calls += 1
        return np.array([[len(t), 1, 2, 3] for t in texts], dtype=np.float32)


def test_corpus_cache_written_once_and_keyed(tmp_path):
    enc = _CountingEncoder()
    texts = [f"document number {i}" * (i % 3 + 1) for i in range(10)]
    first = encode_corpus(enc, texts, cache_dir=tmp_path, dataset_name="toy", settings=RetrievalSettings(chunk_size=4))
    assert enc.calls == 3 and first.shape == (10, 4)
    again = encode_corpus(enc, texts, cache_dir=tmp_path, dataset_name="toy", settings=RetrievalSettings(chunk_size=4))
    assert enc.calls == 3
    np.testing.assert_array_equal(first, again)
    enc.document_max_length = 8  # a setting that changes embeddings gets its own entry
    encode_corpus(enc, texts, cache_dir=tmp_path, dataset_name="toy", settings=RetrievalSettings(chunk_size=4))
    assert enc.calls == 6 and len(list(tmp_path.iterdir())) == 2
    assert not list(tmp_path.rglob("*.partial.npy"))


def test_an_id_with_whitespace_is_refused_instead_of_written_as_seven_fields(tmp_path):

    path = tmp_path / "run.trec"
    with pytest.raises(ValueError, match=r"document id 'rel 1-0' is empty or holds whitespace"):
        write_trec_run({"q1": {"rel 1-0": 1.0, "d2": 0.5}}, path)
    with pytest.raises(ValueError, match=r"query id 'q 1' is empty or holds whitespace"):
        write_trec_run({"q 1": {"d2": 0.5}}, path)
    assert not path.exists()
