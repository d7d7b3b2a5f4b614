"""Exact nearest-neighbour search under a similarity head, with an on-disk corpus cache.

Scores are ``head.score(q, d) = transform_query(q) . transform_document(d)``, so a faiss
``IndexFlatIP`` over document-side-transformed vectors, searched with query-side-transformed
vectors, is exact for every head. The cache stores *raw* embeddings (norm diagnostics need them
and one cache serves every head); it is keyed by everything that changes them: model path and a
weights digest, pooling, document prefix and max length, and the corpus content.

The corpus is encoded and added to the index in chunks written straight into a memory-mapped
``.npy``, so peak memory is the index plus one chunk rather than a second copy of the corpus.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import faiss
import numpy as np
import torch
from tqdm.auto import tqdm

from clipmag.heads import SimilarityHead
from clipmag.naming import slug
from text_retrieval.encoder import TextEncoder
from text_retrieval.metrics import Run

logger = logging.getLogger("clipmag")

__all__ = ["corpus_cache_key", "encode_corpus", "build_index", "search", "head_transform"]

CACHE_VERSION = 1


def head_transform(head: SimilarityHead, vectors: np.ndarray, side: str) -> np.ndarray:
    """Apply one side of the head to raw vectors, returning contiguous float32 for faiss."""
    with torch.no_grad():
        x = torch.from_numpy(np.array(vectors, dtype=np.float32, order="C", copy=True))
        y = head.transform_query(x) if side == "query" else head.transform_document(x)
    return np.ascontiguousarray(y.float().numpy())


def _query_factor(head: SimilarityHead, raw: np.ndarray) -> np.ndarray:
    """Per-query positive factor ``|transform_query(q)| / |q|`` (``|q|^-gq`` for our heads)."""
    transformed = head_transform(head, raw, "query")
    raw_norm = np.linalg.norm(raw.astype(np.float64), axis=1)
    factor = np.linalg.norm(transformed.astype(np.float64), axis=1) / np.maximum(raw_norm, np.finfo(np.float64).tiny)
    return np.where(raw_norm > 0, factor, 1.0)


def corpus_cache_key(encoder: TextEncoder, dataset_name: str, dataset_fingerprint: str) -> tuple[str, dict[str, str]]:
    """Cache folder name and the identity it hashes (recorded next to the embeddings)."""
    identity = {
        "cache_version": str(CACHE_VERSION),
        "model": encoder.name_or_path,
        "weights": encoder.weights_fingerprint(),
        "pooling": encoder.pooling,
        "document_prefix": encoder.document_prefix,
        "document_max_length": str(encoder.document_max_length),
        "dataset": dataset_name,
        "corpus": dataset_fingerprint,
    }
    digest = hashlib.sha1(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]
    model_tag = slug(Path(encoder.name_or_path.rstrip("/")).name, fallback="model")
    return f"{dataset_name}__{model_tag}__{digest}", identity


def encode_corpus(
    encoder: TextEncoder,
    texts: Sequence[str],
    cache_dir: str | Path | None = None,
    dataset_name: str = "corpus",
    dataset_fingerprint: str = "",
    chunk_size: int = 50_000,
    batch_size: int = 64,
    show_progress: bool = True,
) -> np.ndarray:
    """Raw document embeddings [N, D], from the cache when present, else encoded chunk by chunk.

    With ``cache_dir`` the result is a read-only memory map of ``embeddings.npy``; the file is
    written under a temporary name and renamed when complete, so an interrupted run never leaves
    a truncated cache behind.
    """
    if cache_dir is None:
        parts = [
            encoder.encode(texts[i : i + chunk_size], "document", batch_size, show_progress)
            for i in range(0, len(texts), chunk_size)
        ]
        return np.concatenate(parts) if parts else np.zeros((0, encoder.dim), np.float32)
    if not dataset_fingerprint:
        dataset_fingerprint = hashlib.sha1("\0".join(texts).encode()).hexdigest()[:16]
    key, identity = corpus_cache_key(encoder, dataset_name, dataset_fingerprint)
    folder = Path(cache_dir) / key
    target = folder / "embeddings.npy"
    if target.is_file():
        cached = np.load(target, mmap_mode="r")
        if cached.shape == (len(texts), encoder.dim):
            logger.info("corpus embeddings from cache %s", folder)
            return cached
        logger.warning("ignoring cache %s with shape %s (expected %s)", folder, cached.shape, (len(texts), encoder.dim))
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / f"embeddings.{os.getpid()}.partial.npy"
    out = np.lib.format.open_memmap(partial, mode="w+", dtype=np.float32, shape=(len(texts), encoder.dim))
    for start in range(0, len(texts), chunk_size):
        out[start : start + chunk_size] = encoder.encode(
            texts[start : start + chunk_size], "document", batch_size, show_progress
        )
    out.flush()
    del out
    os.replace(partial, target)
    (folder / "identity.json").write_text(
        json.dumps({**identity, "num_documents": len(texts), "created": time.strftime("%Y-%m-%dT%H:%M:%S")}, indent=2)
    )
    logger.info("cached corpus embeddings in %s", folder)
    return np.load(target, mmap_mode="r")


def build_index(doc_embeddings: np.ndarray, head: SimilarityHead, chunk_size: int = 50_000) -> faiss.IndexFlatIP:
    """IndexFlatIP over document-side-transformed vectors, added chunk by chunk."""
    index = faiss.IndexFlatIP(int(doc_embeddings.shape[1]))
    for start in range(0, doc_embeddings.shape[0], chunk_size):
        index.add(head_transform(head, np.asarray(doc_embeddings[start : start + chunk_size]), "document"))
    return index


def search(
    index: faiss.Index,
    query_embeddings: np.ndarray,
    query_ids: Sequence[str],
    doc_ids: Sequence[str],
    head: SimilarityHead,
    top_k: int = 1000,
    excluded: Mapping[str, Iterable[str]] | None = None,
    ignore_identical_ids: bool = False,
    query_batch: int = 1024,
    show_progress: bool = False,
) -> Run:
    """Top-``top_k`` hits per query after the BEIR/BRIGHT exclusions.

    The index is searched with the *raw* query and the scores are then multiplied by the query
    side's positive factor ``|q|^-gq``. That gives the head's scores, and makes the ranking depend
    on the document side alone bit for bit (docs/method.md Prop. 4.1: qnorm ranks exactly as dot, dnorm
    exactly as cosine), where transforming the query first would let float rounding reorder
    near-ties deep in the list.

    Enough extra hits are fetched to cover the exclusions, so each query still gets ``top_k``
    results (when the corpus has them) after filtering.
    """
    if len(query_ids) != query_embeddings.shape[0]:
        raise ValueError(f"{len(query_ids)} query ids but {query_embeddings.shape[0]} query embeddings")
    excluded = excluded or {}
    extra = max((len(set(v)) for v in excluded.values()), default=0) + int(ignore_identical_ids)
    k = min(top_k + extra, index.ntotal)
    run: Run = {}
    for start in tqdm(range(0, len(query_ids), query_batch), desc="search", disable=not show_progress):
        raw = np.array(query_embeddings[start : start + query_batch], dtype=np.float32, order="C")
        scores, positions = index.search(raw, k)
        scores = scores.astype(np.float64) * _query_factor(head, raw)[:, None]  # float64: no new ties
        for row, qid in enumerate(query_ids[start : start + query_batch]):
            skip = set(excluded.get(qid, ()))
            if ignore_identical_ids:
                skip.add(qid)
            hits: dict[str, float] = {}
            for score, position in zip(scores[row].tolist(), positions[row].tolist()):
                if position < 0 or len(hits) == top_k:
                    break
                doc_id = doc_ids[position]
                if doc_id not in skip:
                    hits[doc_id] = score
            run[qid] = hits
    return run
