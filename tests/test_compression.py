"""Compressed documents and the norm: what each level keeps of qnorm's ranking, and the norm-keeping fix.

qnorm scores a document by |d| cos(q, d): its ranking needs the direction and the norm. Binary
codes keep only signs, so every reconstruction has norm sqrt(D) and qnorm ranks by the direction
alone - as cosine does; keeping the norm as one float beside the code restores qnorm's ranking
wherever the code holds the direction exactly.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from clipmag.scoring.heads import build_head
from text_retrieval.data.loaders import RetrievalDataset
from text_retrieval.retrieval.compression import Compression
from text_retrieval.retrieval.index import RetrievalSettings
from text_retrieval.retrieval.search import retrieve

DIM = 16


def _ranking(head_name: str, queries: np.ndarray, docs: np.ndarray) -> np.ndarray:
    scores = build_head(head_name).score(torch.from_numpy(queries), torch.from_numpy(docs)).numpy()
    return np.argsort(-scores, axis=1, kind="stable")


@pytest.fixture
def sign_directions() -> tuple[np.ndarray, np.ndarray]:
    """Queries, and documents whose unit directions are +-1/sqrt(D) patterns (a sign code holds them
    exactly) with log-normal norms spread wide enough that qnorm's ranking differs from cosine's."""
    rng = np.random.default_rng(0)
    signs = rng.choice([-1.0, 1.0], size=(60, DIM))
    norms = np.exp(rng.normal(0, 1, size=(60, 1)))
    docs = (signs / np.sqrt(DIM) * norms).astype(np.float32)
    return rng.normal(size=(8, DIM)).astype(np.float32), docs


@pytest.mark.parametrize("level", ["binary", "int8"])
def test_norm_keeping_codes_of_representable_directions_reproduce_qnorms_ranking(sign_directions, level):
    queries, docs = sign_directions
    compression = Compression.parse(f"{level}+norm").fit(docs)
    rebuilt = compression.reconstruct(docs)
    np.testing.assert_allclose(rebuilt, docs, rtol=1e-5, atol=1e-6)
    assert (_ranking("qnorm", queries, rebuilt) == _ranking("qnorm", queries, docs)).all()


def test_binary_without_the_norm_reduces_qnorm_to_the_directions_ranking(sign_directions):
    queries, docs = sign_directions
    rebuilt = Compression.parse("binary").reconstruct(docs)
    assert np.allclose(np.linalg.norm(rebuilt, axis=1), np.sqrt(DIM))  # every document's norm is gone
    by_direction = _ranking("cosine", queries, docs)
    assert (_ranking("qnorm", queries, rebuilt) == by_direction).all()
    assert (_ranking("qnorm", queries, docs) != by_direction).any()  # and that is not qnorm's ranking


def test_truncation_cuts_both_sides_and_norm_keeping_truncation_keeps_the_full_norm():
    rng = np.random.default_rng(1)
    docs = rng.normal(size=(5, DIM)).astype(np.float32)
    plain, kept = Compression.parse("truncate:4"), Compression.parse("truncate:4+norm")
    np.testing.assert_array_equal(plain.reconstruct(docs), docs[:, :4])
    np.testing.assert_allclose(np.linalg.norm(kept.reconstruct(docs), axis=1), np.linalg.norm(docs, axis=1), rtol=1e-6)
    np.testing.assert_allclose(
        kept.reconstruct(docs) @ docs[0, :4],
        plain.reconstruct(docs) @ docs[0, :4] * (np.linalg.norm(docs, axis=1) / np.linalg.norm(docs[:, :4], axis=1)),
        rtol=1e-5,
    )
    assert plain.queries(docs).shape == (5, 4)
    assert Compression.parse("int8").queries(docs) is docs


def test_int8_takes_per_dimension_ranges_from_calibration_and_clips_outside_them():
    calibration = np.array([[0.0, -1.0], [1.0, 1.0]], dtype=np.float32)
    int8 = Compression.parse("int8").fit(calibration)
    low, step = int8.ranges
    np.testing.assert_allclose(low, [0.0, -1.0])
    np.testing.assert_allclose(step, [1 / 255, 2 / 255])
    inside = np.array([[0.3, 0.1], [0.71, -0.45]], dtype=np.float32)
    assert np.abs(int8.reconstruct(inside) - inside).max() <= step.max() / 2 + 1e-6  # the nearest of 256 levels
    outside = int8.reconstruct(np.array([[-2.0, 3.0]], dtype=np.float32))
    np.testing.assert_allclose(outside, [[0.0, 1.0]], atol=1e-6)  # clipped to the calibration range


def test_memory_per_vector_is_the_codes_size():
    docs = np.random.default_rng(2).normal(size=(10, 384)).astype(np.float32)
    sizes = {}
    for spec in ("truncate:128", "int8", "binary", "binary+norm", "int8+norm"):
        compression = Compression.parse(spec).fit(docs)
        sizes[spec] = compression.describe(384, compression.encode(docs))["bytes_per_vector"]
    assert sizes == {"truncate:128": 512, "int8": 384, "binary": 48, "binary+norm": 52, "int8+norm": 388}
    assert Compression.parse("none").describe(384)["bytes_per_vector"] == 1536


@pytest.mark.parametrize("spec", ["int4", "none+norm", "truncate:0", "binary+", "truncate"])
def test_unknown_compression_is_refused_in_one_line(spec):
    with pytest.raises(ValueError, match=r"^compression .* unknown; valid: none, truncate:K") as err:
        RetrievalSettings(compression=spec)
    assert "\n" not in str(err.value)


def test_evaluation_searches_the_compressed_documents_and_records_their_size(sign_directions):
    queries, docs = sign_directions
    ids = [f"d{i}" for i in range(len(docs))]
    qrels = {f"q{i}": {ids[int(_ranking("qnorm", queries, docs)[i, 0])]: 1} for i in range(len(queries))}
    dataset = RetrievalDataset("toy", ids, ids, {q: q for q in qrels}, qrels)
    head = build_head("qnorm")
    kept, searched = retrieve(docs, queries, dataset, head, 10, RetrievalSettings(compression="binary+norm"))
    plain, _ = retrieve(docs, queries, dataset, head, 10, RetrievalSettings(compression="binary"))
    exact, _ = retrieve(docs, queries, dataset, head, 10)
    assert searched["compression"] == "binary+norm" and searched["bytes_per_vector"] == 6.0
    assert [list(kept[q]) for q in qrels] == [list(exact[q]) for q in qrels]
    assert [list(plain[q]) for q in qrels] != [list(exact[q]) for q in qrels]


def test_int8_floor_gives_sentence_transformers_codes_and_int8_the_nearest_step():
    quantization = pytest.importorskip("sentence_transformers.util.quantization")
    rng = np.random.default_rng(3)
    calibration, docs = rng.normal(size=(200, DIM)).astype(np.float32), rng.normal(size=(50, DIM)).astype(np.float32)
    ranges = np.vstack([calibration.min(axis=0), calibration.max(axis=0)])
    theirs = quantization.quantize_embeddings(docs, "uint8", ranges=ranges)
    floor = Compression.parse("int8-floor").fit(calibration)
    np.testing.assert_array_equal(floor.encode(docs).codes, theirs)
    rebuilt = quantization._dequantize_embeddings(theirs, "uint8", ranges)  # their lower edge of the step
    np.testing.assert_allclose(floor.reconstruct(docs), rebuilt, rtol=1e-5, atol=1e-6)
    nearest = Compression.parse("int8").fit(calibration).encode(docs).codes.astype(int)
    assert set(np.unique(nearest - theirs.astype(int))) == {0, 1}  # ours rounds up where theirs floors
    assert floor.describe(DIM, floor.encode(docs))["bytes_per_vector"] == DIM
