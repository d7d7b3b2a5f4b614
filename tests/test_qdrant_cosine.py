"""What Qdrant's local mode does under ``Distance.COSINE``, pinned against the installed qdrant-client
(docs/deploy.md, "What breaks under a cosine collection"): it stores every vector divided by its
norm, scores the cosine, and so a qnorm model's raw documents in a Cosine collection rank as the
cosine head of the same embeddings, not as qnorm. If a qdrant-client release stops normalising,
these fail and the page's warning must be read again. Real local-mode collections, in memory and
on files (as ``clipmag-index`` builds them; on tmpfs where there is one), over a seeded set whose norms vary by 10x."""

from __future__ import annotations

import numpy as np
import pytest

from clipmag.scoring.heads import build_head
from text_retrieval.retrieval.index import head_transform
from text_retrieval.serving.qdrant_store import QDRANT_COLLECTION, QdrantStore, build_qdrant

qdrant_client = pytest.importorskip("qdrant_client")
models = qdrant_client.models

DOCS, QUERIES, DIM, K = 300, 20, 16, 10


@pytest.fixture(scope="module")
def raw():
    """Documents and queries whose directions cluster and whose norms spread from 0.3 to 3."""
    rng = np.random.default_rng(7)
    centre = rng.normal(size=DIM)
    docs = centre + rng.normal(size=(DOCS, DIM))
    docs *= (rng.uniform(0.3, 3.0, size=DOCS) / np.linalg.norm(docs, axis=1))[:, None]
    queries = centre + rng.normal(size=(QUERIES, DIM))
    return docs.astype(np.float32), queries.astype(np.float32)


def _cosine_collection(docs: np.ndarray):
    client = qdrant_client.QdrantClient(location=":memory:")
    params = models.VectorParams(size=docs.shape[1], distance=models.Distance.COSINE)
    client.create_collection(QDRANT_COLLECTION, vectors_config=params)
    client.upsert(QDRANT_COLLECTION, points=models.Batch(ids=list(range(len(docs))), vectors=docs.tolist()))
    return client


def _top(scores: np.ndarray) -> np.ndarray:
    return np.argsort(-scores, axis=1, kind="stable")[:, :K]


def test_a_cosine_collection_stores_unit_vectors_and_scores_the_cosine(raw):
    docs, queries = raw
    client = _cosine_collection(docs)
    stored = client.retrieve(QDRANT_COLLECTION, ids=list(range(DOCS)), with_vectors=True)
    vectors = np.array([point.vector for point in sorted(stored, key=lambda p: p.id)], dtype=np.float64)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)  # the norm is gone on upload
    unit = docs / np.linalg.norm(docs, axis=1, keepdims=True)
    np.testing.assert_allclose(vectors, unit, rtol=1e-5, atol=1e-6)
    answer = client.query_points(QDRANT_COLLECTION, query=(3.0 * queries[0]).tolist(), limit=DOCS).points
    scores = {point.id: point.score for point in answer}
    cosine = unit @ (queries[0] / np.linalg.norm(queries[0]))
    np.testing.assert_allclose([scores[i] for i in range(DOCS)], cosine, rtol=1e-5, atol=1e-6)


def test_a_qnorm_model_in_a_cosine_collection_ranks_as_cosine(raw, index_folder):
    docs, queries = raw
    qnorm, cosine = build_head("qnorm"), build_head("cosine")
    stored_docs, sent = head_transform(qnorm, docs, "document"), head_transform(qnorm, queries, "query")
    cosine_top = _top(head_transform(cosine, queries, "query") @ head_transform(cosine, docs, "document").T)
    qnorm_top = _top(sent @ stored_docs.T)
    assert not np.array_equal(cosine_top, qnorm_top)  # the two heads rank these documents differently
    index_folder.mkdir(parents=True)
    build_qdrant(iter([stored_docs]), index_folder, DIM, "cosine")  # on files, as clipmag-index builds it
    _, positions = QdrantStore(index_folder, "cosine", DOCS).search(sent, K)
    np.testing.assert_array_equal(positions, cosine_top)
    in_memory = _cosine_collection(stored_docs).query_points(QDRANT_COLLECTION, query=sent[0].tolist(), limit=K)
    assert [point.id for point in in_memory.points] == cosine_top[0].tolist()


def test_a_dot_collection_keeps_the_norm_qnorm_ranks_by(raw, index_folder):
    docs, queries = raw
    qnorm = build_head("qnorm")
    stored_docs, sent = head_transform(qnorm, docs, "document"), head_transform(qnorm, queries, "query")
    index_folder.mkdir(parents=True)
    build_qdrant(iter([stored_docs]), index_folder, DIM, "ip")
    _, positions = QdrantStore(index_folder, "ip", DOCS).search(sent, K)
    np.testing.assert_array_equal(positions, _top(sent @ stored_docs.T))
