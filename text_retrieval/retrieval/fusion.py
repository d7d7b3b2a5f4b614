"""Hybrid retrieval: a dense run under its head fused with BM25, by rank or by normalised score.

Dense scores under dot, qnorm and learnable are unbounded and differ in scale from query to query
(|q| and |d| enter them), and BM25's scale depends on the query's terms, so a plain sum of the two
would let whichever is larger for that query decide. The fusions here do not add raw scores:

* ``rrf``: reciprocal rank fusion (Cormack et al., 2009), ``sum 1 / (RRF_K + rank)`` over the runs
  holding the document, ranks from 1, ``RRF_K = 60``; scores are not read at all.
* ``minmax``: each run's scores of a query mapped to [0, 1] by that query's minimum and maximum,
  then summed; a run whose scores for the query are all equal contributes 0.
* ``zscore``: each run's scores of a query standardised by that query's mean and (population)
  standard deviation, then summed; a run with no spread contributes 0.

A document missing from a run contributes 0 from it (for ``zscore``: the run's mean); a BM25 hit
scored 0 shares no term with the query and is dropped before fusing. These are
the conventions of ``ranx.fuse`` (``method="rrf"``, and ``method="sum"`` with ``norm="min-max"`` or
``norm="zmuv"``), which the tests check them against. Both runs are cut to the same depth first,
and the fused list keeps the best ``depth`` documents (ties by document id).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from text_retrieval.retrieval.bm25 import BM25_SETTINGS, bm25_search, matched
from text_retrieval.retrieval.index import HYBRIDS, Run

if TYPE_CHECKING:
    from text_retrieval.data.loaders import RetrievalDataset

__all__ = ["FUSIONS", "RRF_K", "fuse", "hybrid_with_bm25"]

FUSIONS = tuple(h for h in HYBRIDS if h != "none")
RRF_K = 60


def _contributions(hits: Mapping[str, float], method: str) -> dict[str, float]:
    """One run's contribution to each of its documents for one query."""
    if not hits:
        return {}
    if method == "rrf":
        ranked = sorted(hits.items(), key=lambda kv: (-kv[1], kv[0]))
        return {doc: 1.0 / (RRF_K + rank) for rank, (doc, _) in enumerate(ranked, start=1)}
    scores = np.fromiter(hits.values(), dtype=np.float64, count=len(hits))
    if method == "minmax":
        low, spread = scores.min(), scores.max() - scores.min()
    else:
        low, spread = scores.mean(), scores.std()
    normalised = (scores - low) / spread if spread > 0 else np.zeros_like(scores)
    return dict(zip(hits, normalised.tolist()))


def fuse(runs: Sequence[Run], method: str, depth: int) -> Run:
    """The fusion ``method`` of ``runs`` (each query id -> {document id: score}), ``depth`` hits a query."""
    if method not in FUSIONS:
        raise ValueError(f"fusion {method!r} unknown; valid: {', '.join(FUSIONS)}")
    fused: Run = {}
    for qid in dict.fromkeys(q for run in runs for q in run):
        totals: dict[str, float] = {}
        for run in runs:
            for doc, value in _contributions(run.get(qid, {}), method).items():
                totals[doc] = totals.get(doc, 0.0) + value
        best = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:depth]
        fused[qid] = dict(best)
    return fused


def _without_excluded(run: Run, excluded: Mapping[str, Iterable[str]], identical: bool, depth: int) -> Run:
    """``run`` without each query's excluded documents (and itself, with ``identical``), ``depth`` hits a query."""
    kept: Run = {}
    for qid, hits in run.items():
        skip = set(excluded.get(qid, ())) | ({qid} if identical else set())
        kept[qid] = dict(list((d, s) for d, s in hits.items() if d not in skip)[:depth])
    return kept


def hybrid_with_bm25(dense: Run, dataset: RetrievalDataset, method: str, depth: int) -> tuple[Run, dict]:
    """``dense`` (already searched, exclusions applied) fused with BM25 over ``dataset``'s corpus by
    ``method``; BM25 is searched deep enough to keep ``depth`` hits after the same exclusions. Returns
    the fused run and its description for the results."""
    extra = max((len(set(v)) for v in dataset.excluded.values()), default=0) + int(dataset.ignore_identical_ids)
    qids = list(dense)
    lexical = bm25_search(
        dataset.corpus_ids, dataset.corpus_texts, qids, [dataset.queries[q] for q in qids], depth + extra
    )
    lexical = _without_excluded(matched(lexical), dataset.excluded, dataset.ignore_identical_ids, depth)
    described = {"fusion": method, "with": {"bm25": BM25_SETTINGS}, "depth": depth}
    if method == "rrf":
        described["rrf_k"] = RRF_K
    return fuse([dense, lexical], method, depth), described
