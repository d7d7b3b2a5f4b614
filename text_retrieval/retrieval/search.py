"""Top-k search under a similarity head: exact by default, on whichever exact backend is faster here.

Scores are ``head.score(q, d) = transform_query(q) . transform_document(d)``, and the query
transform only scales each query by a positive factor, so every index holds the corpus in its
document-side-transformed form, is searched with the *raw* query, and the scores are multiplied by
the query factor afterwards: exact for every head, and the ranking depends on the document side
alone bit for bit (docs/method.md Prop. 4.1).

Exact search is a blocked matmul + top-k - what BEIR's exact search and sentence-transformers'
``semantic_search`` do - by torch or faiss, whichever is faster here (``text_retrieval/retrieval/topk.py``;
the choice is recorded with the results), with as many queries per matmul as the memory budget
allows, and one running selection over all of it (``RunningTopK``: after the first chunk only
scores above the k-th best so far are selected). Corpora above the budget (``memory_gb``) are
searched in chunks read from the memory-mapped cache, whose pages are released once scored, so
peak memory stays within the budget. Approximate
indexes are in ``text_retrieval/retrieval/ann.py``; what both kinds share (the settings, the index
interface, the head transforms) is in ``text_retrieval/retrieval/index.py``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from itertools import islice
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from tqdm.auto import tqdm

from clipmag.scoring.heads import SimilarityHead
from text_retrieval.retrieval.ann import ApproximateIndex, recall_vs_exact
from text_retrieval.retrieval.compression import Compression
from text_retrieval.retrieval.fusion import hybrid_with_bm25
from text_retrieval.retrieval.index import (
    Index,
    RetrievalSettings,
    Run,
    query_factor,
    release_pages,
)
from text_retrieval.retrieval.topk import RunningTopK, choose_backend, faiss_topk

if TYPE_CHECKING:
    from text_retrieval.data.loaders import RetrievalDataset

__all__ = ["ExactIndex", "build_index", "search", "retrieve"]

MIN_QUERY_BLOCK = 64  # queries per matmul at the least; more where the memory budget allows (faster GEMMs)
MAX_QUERY_BLOCK = 512  # at the most: a larger matmul gains nothing, and the selection's temporaries grow with it
SLICE_BYTES = 32 * 2**20  # documents read, scored and released at once when the queries fit one buffer


class ExactIndex:
    """The document-side-transformed corpus, searched exactly.

    A corpus whose transformed copy fits half the memory budget is transformed once and kept; a
    larger one stays in its (memory-mapped) raw form and is transformed chunk by chunk at every
    search, each chunk's pages released once it is scored. When every query fits one score
    buffer, a chunk is even read, scored and released a slice (``SLICE_BYTES``) at a time, so a
    memory-mapped corpus holds about one slice of pages at once, not a chunk. ``described`` says
    which backend searched and why (for the results record).
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
        self.slice_rows = max(256, min(self.chunk_rows, SLICE_BYTES // (4 * self.dim)))
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

    def _documents(self, start: int, stop: int) -> torch.Tensor:
        """Transformed rows ``[start, stop)``: a view of the kept corpus, or transformed now."""
        return self._kept[start:stop] if self._kept is not None else self._transform(start, stop)

    def _release(self, start: int, stop: int) -> None:
        """Drop rows ``[start, stop)`` of a streamed corpus from resident memory (a kept one stays)."""
        if self._kept is None:
            release_pages(self._raw, start, stop)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` inner products of raw ``queries`` with the transformed corpus: (scores, positions)."""
        q = torch.from_numpy(np.ascontiguousarray(queries, dtype=np.float32)).to(self.device)
        k = min(k, self.ntotal)
        found = RunningTopK(len(q), k, self.device)
        columns = min(self.chunk_rows, self.ntotal)
        first_documents = functools.partial(self._documents, 0)  # read only if this case is timed
        backend, timings = choose_backend(q, first_documents, columns, k, self.settings.backend)
        self.described.update(backend=backend, calibration=timings, device=str(self.device))
        block = min(len(q), MAX_QUERY_BLOCK, max(MIN_QUERY_BLOCK, int(self.budget / 2 / (4 * columns))))  # half: scores
        scores = torch.empty(block, columns, device=self.device)  # allocated once
        for start in range(0, self.ntotal, self.chunk_rows):
            stop = min(start + self.chunk_rows, self.ntotal)
            if backend == "faiss":
                values, positions = faiss_topk(q, self._documents(start, stop), min(k, stop - start))
                found.add_found(values.to(self.device), positions.to(self.device) + start)
            elif block == len(q) and self._kept is None:
                self._score_sliced(q, start, stop, scores[:, : stop - start])
                found.add_scores(scores[:, : stop - start], start)
            else:
                docs = self._documents(start, stop)
                for first in range(0, len(q), block):
                    rows = slice(first, min(first + block, len(q)))
                    out = scores[: rows.stop - rows.start, : stop - start]
                    found.add_scores(torch.mm(q[rows], docs.T, out=out), start, rows)
            self._release(start, stop)
        values, positions = found.result()
        return values.cpu().numpy(), positions.cpu().numpy()

    def _score_sliced(self, q: torch.Tensor, start: int, stop: int, out: torch.Tensor) -> None:
        """``out = q @ rows[start:stop].T`` of a streamed corpus, read, scored and released a slice at
        a time (column slices of ``out``: the matmul writes them in place)."""
        for first in range(start, stop, self.slice_rows):
            last = min(first + self.slice_rows, stop)
            torch.mm(q, self._transform(first, last).T, out=out[:, first - start : last - start])
            self._release(first, last)


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
        scores = scores.astype(np.float64)  # float64: the query factor makes no new ties
        if not getattr(index, "applies_query_side", False):  # a served index scores the transformed query itself
            scores *= query_factor(head, raw)[:, None]
        for row, qid in enumerate(query_ids[start : start + query_batch]):
            skip = set(excluded.get(qid, ()))
            if ignore_identical_ids:
                skip.add(qid)
            found = positions[row] >= 0  # an approximate index pads with -1
            hits = zip(map(doc_ids.__getitem__, positions[row][found].tolist()), scores[row][found].tolist())
            run[qid] = dict(islice(hits if not skip else ((d, s) for d, s in hits if d not in skip), top_k))
    return run


def retrieve(
    docs: np.ndarray | None,
    queries: np.ndarray,
    dataset: RetrievalDataset,
    head: SimilarityHead,
    top_k: int,
    settings: RetrievalSettings | None = None,
    device: str | torch.device = "cpu",
    index: Index | None = None,
) -> tuple[Run, dict[str, Any]]:
    """Search a retrieval dataset's queries over its (raw) corpus embeddings: the run, and how it was
    searched (method, backend and its timings; for an approximate index its recall@10 against exact
    on a seeded sample of queries). ``index``: a ready index (a served one) instead of one built over
    ``docs``. ``settings.compression`` stores the documents compressed (fitted on them), and
    ``settings.hybrid`` fuses the run with BM25 over the dataset's corpus."""
    settings = settings or RetrievalSettings()
    compression = Compression.parse(settings.compression)
    if index is not None and (not compression.is_none or settings.method != "exact"):
        raise ValueError("a served index keeps the compression and kind it was built with: evaluate it without both")
    searched: dict[str, Any] = {}
    if index is None:
        if docs is None:
            raise TypeError("retrieve: give the corpus embeddings or an index")
        if not compression.is_none:
            codes = compression.fit(docs).encode(docs)
            searched.update(compression.describe(docs.shape[1], codes))
            docs, queries = compression.decode(codes, docs.shape[1]), compression.queries(queries)
        index = build_index(docs, head, settings, device)
    exclusions = {"excluded": dataset.excluded, "ignore_identical_ids": dataset.ignore_identical_ids}
    run = search(index, queries, dataset.query_ids, dataset.corpus_ids, head, top_k, **exclusions)
    searched.update({**getattr(index, "described", {}), "settings": dataclasses.asdict(settings)})
    if settings.method != "exact" and docs is not None:
        searched["recall_vs_exact"] = recall_vs_exact(index, ExactIndex(docs, head, settings, device), queries)
    if settings.hybrid != "none":
        run, searched["hybrid"] = hybrid_with_bm25(run, dataset, settings.hybrid, top_k)
    return run, searched
