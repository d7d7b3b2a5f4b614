"""Retrievers for RAG: a dense encoder under each head, and BM25 as the lexical baseline.

Dense retrieval is :mod:`text_retrieval.retrieval.search` itself (its index and head semantics, and the
corpus cache of :mod:`text_retrieval.retrieval.corpus_cache`; no second search path): raw passage
embeddings are encoded once per model (and cached on disk with ``cache_dir``), raw question
embeddings once, and each head only builds its index over document-side-transformed vectors and
searches. So ``qnorm`` ranks exactly like ``dot`` and ``dnorm`` exactly like ``cosine``, as in
every other evaluator of the project.

BM25 is ``bm25s`` (Lucene's BM25 variant, k1 = 1.5, b = 0.75, English stop words, no stemming;
``text_retrieval/retrieval/bm25.py``) over the same ``title + " " + text`` the dense retriever sees.
A hybrid row fuses a dense row with the BM25 row (reciprocal rank fusion or a per-question
normalised score sum, ``text_retrieval/retrieval/fusion.py``).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clipmag.results.record import encoding_numerics
from clipmag.scoring.heads import build_head
from text_retrieval.model.encoder import TextEncoder
from text_retrieval.rag.data import Corpus, Question
from text_retrieval.retrieval.bm25 import BM25_SETTINGS, bm25_search, matched
from text_retrieval.retrieval.corpus_cache import encode_corpus
from text_retrieval.retrieval.fusion import fuse
from text_retrieval.retrieval.search import build_index, search

logger = logging.getLogger("clipmag")

__all__ = ["Ranking", "RetrieverRun", "dense_runs", "bm25_run", "hybrid_run"]

Ranking = list[tuple[str, float]]


@dataclass
class RetrieverRun:
    """One retriever's rankings (``depth`` passages per question, best first) and its description;
    ``numerics``: the precision a dense retriever encoded in (``encoding_numerics``), None for BM25."""

    label: str
    rankings: dict[str, Ranking]
    head: dict | None
    description: dict[str, object]
    seconds: float
    numerics: dict[str, Any] | None = None


def _fingerprint(corpus: Corpus) -> str:
    digest = hashlib.sha1()
    for p in corpus.passages:
        digest.update(p.id.encode() + b"\0" + p.retrieval_text.encode() + b"\1")
    return digest.hexdigest()[:16]


def dense_runs(
    encoder: TextEncoder,
    corpus: Corpus,
    questions: Sequence[Question],
    norms: Sequence[str],
    depth: int,
    cache_dir: str | Path | None = None,
    batch_size: int = 64,
    label_prefix: str = "",
    show_progress: bool = True,
) -> Iterator[RetrieverRun]:
    """A run per head name in ``norms`` (``model`` or an empty list: the encoder's own head).

    The heads are passed to the search (the encoder is left as it is); the raw embeddings are
    encoded once, with the settings (pooling, prefixes, lengths) the encoder was loaded with.
    """
    start = time.perf_counter()
    doc_ids = [p.id for p in corpus.passages]
    docs = encode_corpus(
        encoder,
        [p.retrieval_text for p in corpus.passages],
        cache_dir=cache_dir,
        dataset_name=f"rag-{corpus.name}",
        dataset_fingerprint=_fingerprint(corpus),
        batch_size=batch_size,
        show_progress=show_progress,
    )
    qids = [q.id for q in questions]
    queries = encoder.encode([q.text for q in questions], "query", batch_size, show_progress)
    encode_seconds = time.perf_counter() - start
    for norm in norms or ["model"]:
        start = time.perf_counter()
        head = encoder.head if norm in ("model", encoder.head.name) else build_head(norm)
        index = build_index(docs, head, device=encoder.device)
        run = search(index, queries, qids, doc_ids, head, top_k=min(depth, len(doc_ids)))
        rankings = {qid: list(hits.items()) for qid, hits in run.items()}
        yield RetrieverRun(
            label=f"{label_prefix}{head.name}",
            rankings=rankings,
            head=encoder.head_record().with_head(head).to_dict(),
            description={"kind": "dense", "model": encoder.name_or_path, "encode_seconds": encode_seconds},
            seconds=time.perf_counter() - start + encode_seconds,
            numerics=encoding_numerics(encoder.precision, encoder.device),
        )


def bm25_run(corpus: Corpus, questions: Sequence[Question], depth: int) -> RetrieverRun:
    """BM25 rankings of every question over the corpus (``text_retrieval/retrieval/bm25.py``)."""
    start = time.perf_counter()
    run = bm25_search(
        [p.id for p in corpus.passages],
        [p.retrieval_text for p in corpus.passages],
        [q.id for q in questions],
        [q.text for q in questions],
        depth,
    )
    return RetrieverRun(
        label="bm25",
        rankings={qid: list(hits.items()) for qid, hits in run.items()},
        head=None,
        description={"kind": "bm25", **BM25_SETTINGS},
        seconds=time.perf_counter() - start,
    )


def hybrid_run(dense: RetrieverRun, lexical: RetrieverRun, method: str, depth: int) -> RetrieverRun:
    """The dense row fused with the BM25 row (its hits scored above 0) by ``method``
    (``text_retrieval/retrieval/fusion.py``), ``depth`` passages a question; labelled
    ``<dense label>+bm25-<method>``, with the dense row's head."""
    start = time.perf_counter()
    runs = [{qid: dict(ranking) for qid, ranking in run.rankings.items()} for run in (dense, lexical)]
    fused = fuse([runs[0], matched(runs[1])], method, depth)
    return RetrieverRun(
        label=f"{dense.label}+bm25-{method}",
        rankings={qid: list(hits.items()) for qid, hits in fused.items()},
        head=dense.head,
        description={"kind": "hybrid", "fusion": method, "dense": dense.description, "bm25": lexical.description},
        seconds=dense.seconds + lexical.seconds + time.perf_counter() - start,
        numerics=dense.numerics,
    )
