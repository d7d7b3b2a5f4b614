"""Hard negatives for training samples, mined under the encoder's own similarity head.

Under a magnitude head (dot, qnorm, dnorm, learnable) the documents that score highest for a
query are not the cosine ones - document norms reorder them - so the negatives a model finds
hard depend on the head it trains with. This module embeds the samples' queries and a corpus,
searches it exactly with ``encoder.head`` (``text_retrieval/retrieval/search.py``, the search
evaluation uses) and hands each query's ranking to the selection rules of
``text_retrieval/retrieval/negatives.py``.

The corpus is keyed by text: the documents given (if any) and then every positive of the samples,
each distinct text once, so a positive's copies are one document and a query's positives - all of
them, from every sample with the same query text - are excluded by id. Samples sharing a query
share its negatives. The corpus goes through the corpus cache (``corpus_cache.py``: cached on disk
with ``cache_dir``, its encoding shared out over torchrun ranks with ``settings.distributed``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from text_retrieval.model.encoder import TextEncoder
from text_retrieval.retrieval.corpus_cache import encode_corpus
from text_retrieval.retrieval.index import RetrievalSettings
from text_retrieval.retrieval.negatives import MiningRules, Selection, select_negatives, summarize
from text_retrieval.retrieval.search import build_index, search

logger = logging.getLogger("clipmag")

__all__ = ["MiningPool", "build_pool", "mine_negatives"]

Sample = dict[str, Any]
HITS_PER_BLOCK = 1_000_000  # (query, candidate) hits held at once: the rankings of a block of queries
SHORT_EXAMPLES = 10  # queries with fewer than k negatives named in the summary


@dataclass
class MiningPool:
    """The distinct queries and documents of a set of samples, and which documents are whose positives."""

    queries: list[str]
    corpus: list[str]
    positives: list[set[int]]  # per query: the corpus rows of all its positives
    sample_query: list[int]  # per sample: the row of its query


def build_pool(samples: Sequence[Sample], corpus: Sequence[str] = ()) -> MiningPool:
    """Group ``samples`` by query text; the corpus is ``corpus`` then the positives, each text once."""
    rows = {text: i for i, text in enumerate(dict.fromkeys([*corpus, *(s["positive"] for s in samples)]))}
    queries: dict[str, int] = {}
    positives: list[set[int]] = []
    sample_query = []
    for sample in samples:
        row = queries.setdefault(sample["query"], len(queries))
        if row == len(positives):
            positives.append(set())
        positives[row].add(rows[sample["positive"]])
        sample_query.append(row)
    return MiningPool(list(queries), list(rows), positives, sample_query)


def _positive_scores(encoder: TextEncoder, queries: np.ndarray, docs: np.ndarray, pool: MiningPool) -> np.ndarray:
    """Per query, the head's score of its lowest-scoring positive (what the margins are measured from)."""
    pairs = [(q, d) for q, rows in enumerate(pool.positives) for d in sorted(rows)]
    q_rows, d_rows = (np.array(side) for side in zip(*pairs))
    with torch.no_grad():
        scores = encoder.head.paired(
            torch.from_numpy(np.asarray(queries[q_rows], dtype=np.float64)),
            torch.from_numpy(np.asarray(docs[d_rows], dtype=np.float64)),
        ).numpy()
    lowest = np.full(len(pool.queries), np.inf)
    np.minimum.at(lowest, q_rows, scores)
    return lowest


def _select_all(
    encoder: TextEncoder,
    queries: np.ndarray,
    docs: np.ndarray,
    pool: MiningPool,
    rules: MiningRules,
    positive_scores: np.ndarray,
    settings: RetrievalSettings,
) -> tuple[list[Selection], dict[str, Any]]:
    """Search every query's top ``rank_max`` + (its positives) and apply the rules; also how it was
    searched. Under sentence-transformers semantics a query's own text, where the corpus holds it,
    is excluded like a positive, and one more candidate is searched for it (as it does)."""
    index = build_index(docs, encoder.head, settings, encoder.device)
    own_text = rules.semantics == "sentence-transformers"
    depth = rules.rank_max + max(len(p) for p in pool.positives) + own_text  # the window, whatever is excluded
    rows = {text: row for row, text in enumerate(pool.corpus)} if own_text else {}
    doc_ids = [str(i) for i in range(len(pool.corpus))]
    selections = []
    step = max(1, HITS_PER_BLOCK // min(depth, len(doc_ids)))
    for start in range(0, len(pool.queries), step):
        block = range(start, min(start + step, len(pool.queries)))
        run = search(index, queries[block.start : block.stop], [str(q) for q in block], doc_ids, encoder.head, depth)
        for q in block:
            hits = run[str(q)]
            candidates = [int(d) for d in hits]
            scores = list(hits.values())
            excluded = pool.positives[q] | ({rows[pool.queries[q]]} if pool.queries[q] in rows else set())
            selection = select_negatives(
                candidates, scores, excluded, float(positive_scores[q]), rules, key=pool.queries[q]
            )
            selections.append(selection)
    return selections, dict(getattr(index, "described", {}))


def mine_negatives(
    encoder: TextEncoder,
    samples: Sequence[Sample],
    rules: MiningRules,
    corpus: Sequence[str] = (),
    cache_dir: str | None = None,
    dataset_name: str = "mining",
    batch_size: int = 64,
    show_progress: bool = True,
    settings: RetrievalSettings | None = None,
) -> tuple[list[Sample], dict[str, Any]] | None:
    """The samples with mined ``negatives`` (replacing any they had) and a summary of the mining.

    Every rank of a distributed run must call; the ranks other than 0 only help encode the corpus
    and get None.
    """
    if not samples:
        raise ValueError("no training samples to mine negatives for")
    settings = settings or RetrievalSettings()
    pool = build_pool(samples, corpus)
    logger.info("mining: %d samples, %d queries, %d documents", len(samples), len(pool.queries), len(pool.corpus))
    docs = encode_corpus(
        encoder,
        pool.corpus,
        cache_dir=cache_dir,
        dataset_name=dataset_name,
        batch_size=batch_size,
        show_progress=show_progress,
        settings=settings,
    )
    if settings.encodes_only:
        return None
    queries = encoder.encode(pool.queries, "query", batch_size, show_progress)
    positive_scores = _positive_scores(encoder, queries, docs, pool)
    selections, searched = _select_all(encoder, queries, docs, pool, rules, positive_scores, settings)
    mined = [
        {"query": s["query"], "positive": s["positive"], "negatives": [pool.corpus[d] for d in selections[q].ids]}
        for s, q in zip(samples, pool.sample_query)
    ]
    short = [pool.queries[q] for q, s in enumerate(selections) if len(s.ids) < rules.num_negatives]
    summary = {
        "samples": len(samples),
        "corpus_documents": len(pool.corpus),
        **summarize(selections, positive_scores, rules),
        "queries_fewer_than_k_examples": short[:SHORT_EXAMPLES],
        "search": searched,
    }
    return mined, summary
