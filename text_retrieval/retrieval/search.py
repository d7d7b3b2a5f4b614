"""Top-k search under a similarity head: exact by default, on whichever exact backend is faster here.

Scores are ``head.score(q, d) = transform_query(q) . transform_document(d)``, and the query
transform only scales each query by a positive factor, so every index holds the corpus in its
document-side-transformed form, is searched with the *raw* query, and the scores are multiplied by
the query factor afterwards: exact for every head, and the ranking depends on the document side
alone bit for bit (docs/method.md Prop. 4.1).

Exact search is a blocked matmul + top-k - what BEIR's exact search and sentence-transformers'
``semantic_search`` do - by torch or faiss, whichever is faster here (``text_retrieval/retrieval/topk.py``;
the choice is recorded with the results), with as many queries per matmul as the memory budget
allows. Corpora above the budget (``memory_gb``) are searched in chunks read from the memory-mapped
cache, whose pages are released after each chunk, so peak memory stays near the budget. Approximate
indexes are in ``text_retrieval/retrieval/ann.py``; what both kinds share (the settings, the index
interface, the head transforms) is in ``text_retrieval/retrieval/index.py``.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import islice
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from tqdm.auto import tqdm

from clipmag.heads import SimilarityHead
from text_retrieval.evaluation.metrics import Run
from text_retrieval.retrieval.ann import ApproximateIndex, recall_vs_exact
from text_retrieval.retrieval.index import (
    Index,
    RetrievalSettings,
    query_factor,
    release_pages,
)
from text_retrieval.retrieval.topk import KERNELS, MIN_QUERY_BLOCK, choose_backend

if TYPE_CHECKING:
    from text_retrieval.data import RetrievalDataset

__all__ = ["ExactIndex", "build_index", "search", "retrieve"]


class ExactIndex:
    """The document-side-transformed corpus, searched exactly.

    A corpus whose transformed copy fits the memory budget is transformed once and kept; a larger
    one stays in its (memory-mapped) raw form and is transformed chunk by chunk at every search.
    ``described`` says which backend searched and why (for the results record).
    """

    def __init__(
        self,
        doc_embeddings: np.ndarray,
        head: SimilarityHead,
        settings: RetrievalSettings | None = None,
        device: str | torch.device = "cpu",
    ) -> None:
        self.settings = settings or RetrievalSettings()
        self.head, self.device = head, torch.device(device)
        self.ntotal, self.dim = int(doc_embeddings.shape[0]), int(doc_embeddings.shape[1])
        self.budget = budget = self.settings.memory_gb * 2**30
        self.chunk_rows = max(1024, int(budget / 2 / (4 * self.dim)))  # half the budget: documents
        self._raw = doc_embeddings
        self._kept = self._transform(0, self.ntotal) if self.ntotal <= self.chunk_rows else None
        self.described: dict[str, Any] = {"method": "exact", "chunks": math.ceil(self.ntotal / self.chunk_rows)}

    def _transform(self, start: int, stop: int) -> torch.Tensor:
        """Rows ``[start, stop)`` document-side-transformed. fp32 rows are read in place (from a memory
        map too: the head's transform never writes to its input); other dtypes are converted."""
        chunk = np.asarray(self._raw[start:stop])
        if chunk.dtype != np.float32 or not chunk.flags.c_contiguous:
            chunk = np.ascontiguousarray(chunk, dtype=np.float32)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "The given NumPy array is not writable")
            rows = torch.from_numpy(chunk)
        with torch.no_grad():
            return self.head.transform_document(rows.to(self.device)).float()

    def chunks(self) -> Iterator[tuple[int, torch.Tensor]]:
        """(first row, transformed rows) over the corpus, at most ``chunk_rows`` at a time."""
        if self._kept is not None:
            yield 0, self._kept
            return
        for start in range(0, self.ntotal, self.chunk_rows):
            yield start, self._transform(start, min(start + self.chunk_rows, self.ntotal))

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` inner products of raw ``queries`` with the transformed corpus: (scores, positions).

        Each chunk's top-k is kept and one selection over all of them ends the search: a running
        merge after every chunk would re-select k of 2k per chunk and copy both halves each time."""
        q = torch.from_numpy(np.ascontiguousarray(queries, dtype=np.float32)).to(self.device)
        k = min(k, self.ntotal)
        found_values, found_indices = [], []
        for start, docs in self.chunks():
            backend, timings = choose_backend(q, docs, k, self.settings.backend)
            self.described.update(backend=backend, calibration=timings, device=str(self.device))
            block = max(MIN_QUERY_BLOCK, int(self.budget / 2 / (4 * docs.shape[0])))  # the other half: scores
            values, indices = KERNELS[backend](q, docs, min(k, docs.shape[0]), block)
            if self._kept is None:  # streamed: this chunk's pages leave resident memory
                release_pages(self._raw, start, start + docs.shape[0])
            found_values.append(values.to(q.device))
            found_indices.append(indices.to(q.device) + start)
        if len(found_values) == 1:
            return found_values[0].cpu().numpy(), found_indices[0].cpu().numpy()
        values, order = torch.topk(torch.cat(found_values, dim=1), k, dim=1)
        return values.cpu().numpy(), torch.gather(torch.cat(found_indices, dim=1), 1, order).cpu().numpy()


def build_index(
    doc_embeddings: np.ndarray,
    head: SimilarityHead,
    settings: RetrievalSettings | None = None,
    device: str | torch.device = "cpu",
) -> Index:
    """The index ``settings.method`` names over ``doc_embeddings`` (raw; any float dtype, memory-mapped or not)."""
    settings = settings or RetrievalSettings()
    if settings.method == "exact":
        return ExactIndex(doc_embeddings, head, settings, device)
    return ApproximateIndex(doc_embeddings, head, settings)


def search(
    index: Index,
    query_embeddings: np.ndarray,
    query_ids: Sequence[str],
    doc_ids: Sequence[str],
    head: SimilarityHead,
    top_k: int = 1000,
    excluded: Mapping[str, Iterable[str]] | None = None,
    ignore_identical_ids: bool = False,
    query_batch: int = 4096,
    show_progress: bool = False,
) -> Run:
    """Top-``top_k`` hits per query after the BEIR/BRIGHT exclusions, scored by ``head``.

    The index is searched with the *raw* query and the scores are then multiplied, in float64, by
    the query side's positive factor ``|q|^-gq`` (module docstring). Enough extra hits are fetched
    to cover the exclusions, so each query still gets ``top_k`` results (when the corpus has them).
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
        scores = scores.astype(np.float64) * query_factor(head, raw)[:, None]  # float64: no new ties
        for row, qid in enumerate(query_ids[start : start + query_batch]):
            skip = set(excluded.get(qid, ()))
            if ignore_identical_ids:
                skip.add(qid)
            found = positions[row] >= 0  # an approximate index pads with -1
            hits = zip(map(doc_ids.__getitem__, positions[row][found].tolist()), scores[row][found].tolist())
            run[qid] = dict(islice(hits if not skip else ((d, s) for d, s in hits if d not in skip), top_k))
    return run


def retrieve(
    docs: np.ndarray,
    queries: np.ndarray,
    dataset: RetrievalDataset,
    head: SimilarityHead,
    top_k: int,
    settings: RetrievalSettings | None = None,
    device: str | torch.device = "cpu",
) -> tuple[Run, dict[str, Any]]:
    """Search a retrieval dataset's queries over its (raw) corpus embeddings: the run, and how it was
    searched (method, backend and its timings; for an approximate index its recall@10 against exact
    on a seeded sample of queries)."""
    settings = settings or RetrievalSettings()
    index = build_index(docs, head, settings, device)
    exclusions = {"excluded": dataset.excluded, "ignore_identical_ids": dataset.ignore_identical_ids}
    run = search(index, queries, dataset.query_ids, dataset.corpus_ids, head, top_k, **exclusions)
    searched = {**getattr(index, "described", {}), "settings": dataclasses.asdict(settings)}
    if settings.method != "exact":
        searched["recall_vs_exact"] = recall_vs_exact(index, ExactIndex(docs, head, settings, device), queries)
    return run, searched
