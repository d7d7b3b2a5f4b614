"""The MIPS reduction of the approximate indexes: its exactness on flat search, what it does to recall
on spread norms, and the index settings recorded in eval_text's results (on a tiny real SciFact cut)."""

from __future__ import annotations

import json

import faiss
import numpy as np
import pytest
from text_fixtures import minilm_path, scifact_subset

from clipmag.scoring.heads import build_head
from text_retrieval.evaluation import cli
from text_retrieval.retrieval.ann import ApproximateIndex, recall_vs_exact
from text_retrieval.retrieval.index import RetrievalSettings, head_transform
from text_retrieval.retrieval.mips import augment_documents, augment_queries
from text_retrieval.retrieval.search import ExactIndex, build_index


def _spread(n: int, dim: int, seed: int, centers: int = 100, sigma: float = 1.0) -> np.ndarray:
    """Clustered directions with log-normal norms: the largest norms are ~20x the median at sigma 1."""
    rng = np.random.default_rng(seed)
    middle = np.random.default_rng(99).standard_normal((centers, dim)).astype(np.float32) * 2
    x = middle[rng.integers(0, centers, n)] + rng.standard_normal((n, dim)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return (x * rng.lognormal(0.0, sigma, (n, 1))).astype(np.float32)


def _assert_reduction_is_exact(docs: np.ndarray, queries: np.ndarray, k: int) -> None:
    """Flat L2 and flat cosine search over the augmented vectors return the inner-product top-k."""
    max_norm = float(np.linalg.norm(docs, axis=1).max())
    augmented, asked = augment_documents(docs, max_norm), augment_queries(queries)
    np.testing.assert_allclose(np.linalg.norm(augmented.astype(np.float64), axis=1), max_norm, rtol=1e-6)
    np.testing.assert_allclose(asked @ augmented.T, queries @ docs.T, rtol=1e-5, atol=1e-5)
    truth = queries.astype(np.float64) @ docs.T.astype(np.float64)
    expected = np.sort(truth, axis=1)[:, ::-1][:, :k]
    unit = augmented / np.linalg.norm(augmented, axis=1, keepdims=True)
    for metric, base in ((faiss.METRIC_L2, augmented), (faiss.METRIC_INNER_PRODUCT, unit)):  # L2; cosine
        _, positions = faiss.knn(asked, base, k, metric=metric)
        found = np.take_along_axis(truth, positions, axis=1)  # the exact inner products of the hits, in order
        np.testing.assert_allclose(found, expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max())
        assert (positions == np.argsort(-truth, axis=1)[:, :k]).mean() > 0.999  # only near-ties may swap


@pytest.mark.parametrize("name", ["dot", "learnable"])
def test_euclidean_order_of_augmented_vectors_is_the_inner_product_order(name):
    head = build_head(name, **({"gq": 0.3, "gd": 0.4} if name == "learnable" else {}))
    docs = head_transform(head, _spread(3000, 32, 0), "document")
    _assert_reduction_is_exact(docs, _spread(200, 32, 1), k=50)


def test_documents_of_unit_norm_gain_only_a_vanishing_coordinate():
    docs = head_transform(build_head("cosine"), _spread(1000, 16, 0), "document")
    extra = augment_documents(docs, float(np.linalg.norm(docs, axis=1).max()))[:, -1]
    assert np.abs(extra).max() < 1e-3


@pytest.mark.parametrize("method", ["hnsw", "ivf"])
def test_reduced_index_scores_hits_by_their_exact_inner_products(method):
    head = build_head("dot")
    docs, queries = _spread(4000, 32, 0), _spread(50, 32, 1)
    index = build_index(docs, head, RetrievalSettings(method=method, ann_transform="mips"))
    scores, positions = index.search(queries, 20)
    assert (positions >= 0).all()
    expected = np.einsum("qd,qkd->qk", queries, docs[positions])
    np.testing.assert_allclose(scores, expected, rtol=1e-5, atol=1e-5)
    assert index.described["transform"] == "mips"
    assert index.described["max_document_norm"] == pytest.approx(float(np.linalg.norm(docs, axis=1).max()))


def test_on_spread_norms_the_reduction_helps_ivf_and_not_hnsw():
    """What mips.py reports, on one spread-norm set (log-normal sigma 1): IVF's recall@10 rises with the
    reduction; HNSW's inner-product graph already reaches the winners, and the reduction costs recall."""
    head = build_head("dot")
    docs, queries = _spread(5000, 32, 0), _spread(200, 32, 10)
    exact = ExactIndex(docs, head)
    recall = {
        (method, transform): recall_vs_exact(
            ApproximateIndex(docs, head, RetrievalSettings(method=method, ann_transform=transform)), exact, queries
        )["recall@10"]
        for method in ("hnsw", "ivf")
        for transform in ("none", "mips")
    }
    assert recall["ivf", "mips"] >= recall["ivf", "none"] + 0.05, recall
    assert recall["hnsw", "none"] >= 0.99 and recall["hnsw", "none"] >= recall["hnsw", "mips"], recall


def test_settings_name_a_bad_transform_and_refuse_it_on_exact_search():
    with pytest.raises(ValueError, match="ann_transform 'l2' unknown; valid: none, mips"):
        RetrievalSettings(method="hnsw", ann_transform="l2")
    with pytest.raises(ValueError, match="approximate methods"):
        RetrievalSettings(ann_transform="mips")
    with pytest.raises(ValueError, match="approximate methods"):  # the command line says so before anything runs
        cli.parse_args(["--model", "m", "--data", "d", "--ann-transform", "mips"])
    args = cli.parse_args(["--model", "m", "--data", "d", "--search", "hnsw", "--ann-transform", "mips"])
    assert args.retrieval.ann_transform == "mips"


def test_eval_text_records_the_index_and_its_recall(tmp_path):
    """A tiny real case: MiniLM on a SciFact cut under the dot head, HNSW and IVF with the reduction."""
    data = scifact_subset(tmp_path / "scifact", n_queries=10, n_docs=60)
    cache = tmp_path / "cache"
    records = {}
    for method in ("hnsw", "ivf"):
        out = tmp_path / method
        args = ["--model", minilm_path(), "--data", str(data), "--norm", "dot", "--max-length", "32"]
        args += ["--top-k", "20", "--search", method, "--ann-transform", "mips", "--output", str(out)]
        cli.main([*args, "--cache-dir", str(cache), "--quiet"])
        (path,) = out.glob("*.json")
        records[method] = json.loads(path.read_text())["search"]
    (embeddings,) = cache.glob("*/embeddings.npy")
    docs = np.load(embeddings)
    hnsw, ivf = records["hnsw"], records["ivf"]
    for searched in (hnsw, ivf):
        assert searched["transform"] == "mips" and searched["settings"]["ann_transform"] == "mips"
        assert searched["max_document_norm"] == pytest.approx(float(np.linalg.norm(docs, axis=1).max()), rel=1e-5)
        assert 0.0 <= searched["recall_vs_exact"]["recall@10"] <= 1.0 and searched["recall_vs_exact"]["queries"] == 10
    assert hnsw["method"] == "hnsw" and {"M", "efConstruction", "efSearch"} <= set(hnsw)
    assert hnsw["recall_vs_exact"]["recall@10"] == 1.0  # efSearch 128 over 60 documents visits them all
    assert ivf["method"] == "ivf" and ivf["nlist"] >= 1 and 1 <= ivf["nprobe"] <= ivf["nlist"]
    real = np.asarray(docs, dtype=np.float32)
    _assert_reduction_is_exact(real, real[:20], k=10)  # on real vectors too (documents as the queries)
