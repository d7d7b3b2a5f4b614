"""Retrieval metrics through pytrec_eval, and TREC run files.

Nothing is hand-computed: every number comes from pytrec_eval (trec_eval's own code), so our
figures match BEIR, MTEB and anyone who runs trec_eval on our run files. Metric names follow
BEIR: ``NDCG@10`` (ndcg_cut.10), ``Recall@100`` (recall.100), ``MAP@100`` (map_cut.100) and
``MRR@10`` (recip_rank on each query's top 10).

Two filters are applied before scoring, both in :func:`drop_excluded`: BEIR's rule of ignoring a
hit whose document id equals the query id, and BRIGHT's per-query ``excluded_ids``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytrec_eval

from text_retrieval.retrieval.index import Run

logger = logging.getLogger("clipmag")

__all__ = [
    "METRICS",
    "check_trec_ids",
    "drop_excluded",
    "truncate_run",
    "evaluate_run",
    "write_trec_run",
    "read_trec_run",
]

Qrels = Mapping[str, Mapping[str, int]]

# our name -> (pytrec_eval measure, result key, run depth it is computed on; None = full run)
METRICS: dict[str, tuple[str, str, int | None]] = {
    "NDCG@10": ("ndcg_cut.10", "ndcg_cut_10", None),
    "Recall@100": ("recall.100", "recall_100", None),
    "MAP@100": ("map_cut.100", "map_cut_100", None),
    "MRR@10": ("recip_rank", "recip_rank", 10),
}


def drop_excluded(
    run: Mapping[str, Mapping[str, float]],
    excluded: Mapping[str, Iterable[str]] | None = None,
    ignore_identical_ids: bool = False,
) -> Run:
    """Remove, per query, hits listed in ``excluded[qid]`` and (optionally) the hit with id == qid."""
    excluded = excluded or {}
    cleaned: Run = {}
    for qid, hits in run.items():
        skip = set(excluded.get(qid, ()))
        if ignore_identical_ids:
            skip.add(qid)
        cleaned[qid] = {doc: float(score) for doc, score in hits.items() if doc not in skip}
    return cleaned


def truncate_run(run: Mapping[str, Mapping[str, float]], depth: int) -> Run:
    """Keep each query's ``depth`` best hits, ordered as trec_eval orders them (score, then doc id, descending)."""
    return {
        qid: dict(sorted(hits.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)[:depth])
        for qid, hits in run.items()
    }


def evaluate_run(
    qrels: Qrels, run: Mapping[str, Mapping[str, float]], metrics: Iterable[str] = tuple(METRICS)
) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Mean and per-query metrics of ``run`` against ``qrels`` (graded gains allowed).

    Means are over the queries pytrec_eval evaluates (judged queries present in the run), as BEIR
    averages; judged queries missing from the run are logged, since they silently raise the mean.
    """
    metrics = list(metrics)
    unknown = set(metrics) - set(METRICS)
    if unknown:
        raise ValueError(f"unknown metric(s) {sorted(unknown)}; known: {', '.join(METRICS)}")
    qrels = {str(q): {str(d): int(g) for d, g in judged.items()} for q, judged in qrels.items()}
    missing = [q for q in qrels if q not in run or not run[q]]
    if missing:
        logger.warning(
            "%d judged queries have no hits in the run and are not averaged (e.g. %s)", len(missing), missing[:3]
        )
    per_query: dict[str, dict[str, float]] = {}
    by_depth: dict[int | None, list[str]] = {}
    for name in metrics:
        by_depth.setdefault(METRICS[name][2], []).append(name)
    for depth, names in by_depth.items():
        scored = run if depth is None else truncate_run(run, depth)
        scored = {q: {d: float(s) for d, s in hits.items()} for q, hits in scored.items()}
        evaluator = pytrec_eval.RelevanceEvaluator(qrels, {METRICS[n][0] for n in names})
        for qid, values in evaluator.evaluate(scored).items():
            row = per_query.setdefault(qid, {})
            for name in names:
                row[name] = float(values[METRICS[name][1]])
    mean = {
        name: (math.fsum(row[name] for row in per_query.values()) / len(per_query) if per_query else 0.0)
        for name in metrics
    }
    return mean, per_query


def check_trec_ids(ids: Iterable[str], what: str, source: str) -> None:
    """Refuse an id a TREC run file cannot hold: its fields are separated by whitespace, so an id
    with a space would be read back (by trec_eval too) as two fields."""
    bad = next((i for i in ids if not i or any(c.isspace() for c in i)), None)
    if bad is not None:
        raise ValueError(
            f"{source}: {what} id {bad!r} is empty or holds whitespace, which a TREC run file "
            "(whitespace-separated fields) cannot hold; rename it in the data set"
        )


def write_trec_run(run: Mapping[str, Mapping[str, float]], path: str | Path, tag: str = "clipmag") -> Path:
    """Write ``qid Q0 docid rank score tag`` lines, best hit first per query."""
    check_trec_ids(run, "query", str(path))
    check_trec_ids((d for hits in run.values() for d in hits), "document", str(path))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tag = tag.replace(" ", "_") or "clipmag"
    with open(path, "w", encoding="utf-8") as handle:
        for qid, hits in run.items():
            ranked = sorted(hits.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
            for rank, (doc_id, score) in enumerate(ranked, start=1):
                handle.write(f"{qid} Q0 {doc_id} {rank} {score!r} {tag}\n")
    return path


def read_trec_run(path: str | Path) -> Run:
    """Read a TREC run file (six whitespace-separated fields per line)."""
    run: Run = {}
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            fields = line.split()
            if not fields:
                continue
            if len(fields) != 6:
                raise ValueError(
                    f"{path}, line {number}: expected 'qid Q0 docid rank score tag', found {len(fields)} fields"
                )
            try:
                run.setdefault(fields[0], {})[fields[2]] = float(fields[4])
            except ValueError:
                raise ValueError(
                    f"{path}, line {number}: expected a numeric score in field 5, found {fields[4]!r}"
                ) from None
    return run
