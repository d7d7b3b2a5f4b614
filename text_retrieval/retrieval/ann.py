"""Approximate top-k search (faiss HNSW or IVF), valid under every head, with its recall measured.

Documents are indexed in their head-transformed form, as for exact search, and the query factor is
applied after search (``text_retrieval/retrieval/search.py``), so the index ranks by the head's scores.
With ``ann_transform`` ``mips`` they are first brought to one norm by the reduction of inner-product
search to nearest-neighbour search (``text_retrieval/retrieval/mips.py``, which also says why ``none``
is the default); either way the hits are scored by their exact inner products. ``described`` records
the index (method, transform, largest document norm, HNSW or IVF parameters) with the results, and
``recall_vs_exact`` what it reaches on the evaluated queries.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import faiss
import numpy as np

from clipmag.scoring.heads import SimilarityHead
from text_retrieval.retrieval.index import Index, RetrievalSettings, head_transform, release_pages
from text_retrieval.retrieval.mips import augment_documents, augment_queries

__all__ = ["ApproximateIndex", "new_faiss_index", "recall_vs_exact", "widen_search", "HNSW_M", "HNSW_EF_SEARCH"]

HNSW_M, HNSW_EF_SEARCH = 32, 128
IVF_LISTS_PER_SQRT_N, IVF_PROBE_FRACTION = 4, 1 / 8
_ADD_ROWS = 65_536


def new_faiss_index(
    method: str, dim: int, ntotal: int, metric: int = faiss.METRIC_INNER_PRODUCT
) -> tuple[faiss.Index, dict[str, Any]]:
    """An empty faiss index of ``method`` (``flat``, ``hnsw`` or ``ivf``) for ``ntotal`` vectors of ``dim``
    under ``metric``, at this module's settings, and those settings for the results (IVF trains on
    the first rows added)."""
    if method == "flat":
        return faiss.IndexFlat(dim, metric), {}
    if method == "hnsw":
        index = faiss.IndexHNSWFlat(dim, HNSW_M, metric)
        parameters = {"M": HNSW_M, "efConstruction": index.hnsw.efConstruction, "efSearch": HNSW_EF_SEARCH}
        return index, {**parameters, "efSearch_raised_to_k": True}  # a search for more hits widens the beam to k
    lists = max(1, min(ntotal // 39, int(IVF_LISTS_PER_SQRT_N * math.sqrt(ntotal))))
    index = faiss.IndexIVFFlat(faiss.IndexFlat(dim, metric), dim, lists, metric)  # inner product: spherical k-means
    index.nprobe = max(1, math.ceil(lists * IVF_PROBE_FRACTION))
    return index, {"nlist": lists, "nprobe": index.nprobe}


def widen_search(index: faiss.Index, k: int) -> None:
    """Let an HNSW index return ``k`` hits: it returns at most ``efSearch``, so the beam is widened to ``k``."""
    hnsw = getattr(faiss.downcast_index(index), "hnsw", None)
    if hnsw is not None:
        hnsw.efSearch = max(HNSW_EF_SEARCH, k)


class ApproximateIndex:
    """HNSW (``settings.method == "hnsw"``) or IVF-Flat (``"ivf"``) over the transformed documents."""

    def __init__(self, doc_embeddings: np.ndarray, head: SimilarityHead, settings: RetrievalSettings) -> None:
        self.ntotal, dim = int(doc_embeddings.shape[0]), int(doc_embeddings.shape[1])
        self.head, self._raw = head, doc_embeddings
        self.max_norm = self._max_norm() if settings.ann_transform == "mips" else None
        dim += self.max_norm is not None
        self.index, parameters = new_faiss_index(settings.method, dim, self.ntotal)
        for rows in self._transformed():
            if self.max_norm is not None:
                rows = augment_documents(rows, self.max_norm)
            if not self.index.is_trained:  # IVF: the coarse clusters come from the first rows
                self.index.train(rows)
            self.index.add(rows)
        self.described: dict[str, Any] = {
            "method": settings.method,
            "metric": "inner product",
            "transform": settings.ann_transform,
            "max_document_norm": self.max_norm,
            **parameters,
        }

    def _transformed(self) -> Iterator[np.ndarray]:
        """The head-transformed corpus, ``_ADD_ROWS`` rows at a time (a memory map's pages released after)."""
        for start in range(0, self.ntotal, _ADD_ROWS):
            stop = min(start + _ADD_ROWS, self.ntotal)
            yield head_transform(self.head, np.asarray(self._raw[start:stop]), "document")
            release_pages(self._raw, start, stop)

    def _max_norm(self) -> float:
        """The largest transformed document norm: a first pass, since the reduction needs it before adding."""
        return max((float(np.linalg.norm(rows, axis=1).max(initial=0.0)) for rows in self._transformed()), default=0.0)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Approximate top-``k`` inner products (exact for the hits found; position -1 pads missing hits)."""
        k = min(k, self.ntotal)
        widen_search(self.index, k)
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        return self.index.search(queries if self.max_norm is None else augment_queries(queries), k)


def recall_vs_exact(
    approximate: Index, exact: Index, queries: np.ndarray, k: int = 10, sample: int = 256, seed: int = 0
) -> dict[str, Any]:
    """Mean fraction of the exact top-``k`` that the approximate index also returns in its top-``k``,
    over a seeded sample of at most ``sample`` queries (the exact search of all would defeat the index)."""
    rows = np.random.default_rng(seed).permutation(len(queries))[:sample]
    picked = np.asarray(queries)[np.sort(rows)]
    _, found = approximate.search(picked, k)
    _, truth = exact.search(picked, k)
    overlap = [len(set(a.tolist()) & set(b.tolist())) / max(1, len(b)) for a, b in zip(found, truth)]
    return {f"recall@{k}": float(np.mean(overlap)) if overlap else 1.0, "queries": len(picked), "seed": seed}
