"""The reduction of maximum inner-product search to nearest-neighbour search, an option of the
approximate indexes (``RetrievalSettings.ann_transform = "mips"``).

One coordinate ``sqrt(M^2 - |d|^2)`` appended to every head-transformed document, with ``M`` the
largest document norm, gives every document the norm ``M``; a 0 appended to the query leaves each of
its inner products unchanged. Then ``|q - d|^2 = |q|^2 + M^2 - 2 q.d``, so the Euclidean order of the
augmented vectors is their inner-product order, and between documents ``a.b = M^2 - |a - b|^2 / 2``:
an index that builds its structure from documents (HNSW's graph, IVF's spherical k-means) builds it
as over vectors of one norm (Bachrach et al., 2014) instead of letting the largest norms dominate.
The index keeps the inner-product metric, which orders the augmented vectors as the Euclidean
distance does (the cosine too: their norms are equal) and keeps the scores exact inner products.

``none`` stays the default because it measured better wherever real embeddings were tried:
all-MiniLM-L6-v2 on the first 1,000 documents of SciFact, Cranfield and the bundled RAG passages
(max length 64, 92-100 queries), under dot, qnorm and learnable, recall@10 against exact went from
0.78-0.85 to 0.74-0.84 for IVF and from 0.997-1.0 to 0.990-1.0 for HNSW with the reduction (cosine
and dnorm documents have unit norm, and it changes nothing). On synthetic clustered sets (5k-10k x
32-64) with unit directions and log-normal norms (sigma 1) it raised IVF's recall (0.71-0.82 ->
0.85-0.97; ``tests/test_ann_transform.py`` checks one) but lowered HNSW's (1.0 -> 0.87-0.98: the
inner-product graph already reaches the large-norm documents that win), and where the norms came
from unnormalised cluster draws it lowered IVF's too (0.78-0.82 -> 0.56-0.68). So the gain depends
on the data; ``benchmarks/bench_ann_heads.py`` measures both on the full corpora, every head.
"""

from __future__ import annotations

import numpy as np

__all__ = ["augment_documents", "augment_queries"]


def augment_documents(rows: np.ndarray, max_norm: float) -> np.ndarray:
    """``rows`` (float32, already transformed) with the coordinate that brings each to norm ``max_norm``.

    The square root is taken in float64: at the largest norms ``M^2 - |d|^2`` is a difference of
    near-equal numbers, and rounding must not make it negative.
    """
    wide = np.asarray(rows, dtype=np.float64)
    extra = np.sqrt(np.maximum(float(max_norm) ** 2 - np.einsum("ij,ij->i", wide, wide), 0.0))
    return np.ascontiguousarray(np.hstack([rows, extra[:, None]]), dtype=np.float32)


def augment_queries(queries: np.ndarray) -> np.ndarray:
    """``queries`` with a zero coordinate: their inner products with augmented documents are unchanged."""
    queries = np.asarray(queries, dtype=np.float32)
    return np.ascontiguousarray(np.hstack([queries, np.zeros((len(queries), 1), dtype=np.float32)]))
