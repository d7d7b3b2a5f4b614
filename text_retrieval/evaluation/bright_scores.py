"""BRIGHT's scoring on top of the shared metrics: Recall@1, and the plain mean over tasks.

The official long-document setting headlines Recall@1; BRIGHT's own score for a model is the mean
of the per-task scores (each task weighs the same, however many queries it has), never a mean
pooled over the queries of all tasks. Two BRIGHT roots in one evaluation are two suites, each
averaged alone and named by its root where their names agree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from clipmag.storage.naming import distinct_labels
from text_retrieval.evaluation.metrics import Qrels, evaluate_run, truncate_run

__all__ = ["add_recall_at_1", "bright_summary"]

SUMMARY_METRICS = ("NDCG@10", "Recall@1", "Recall@100")


def add_recall_at_1(
    qrels: Qrels, run: Mapping[str, Mapping[str, float]], mean: dict[str, float], per_query: dict[str, dict[str, float]]
) -> None:
    """Add ``Recall@1`` to ``mean`` and ``per_query``, from pytrec_eval like every other metric.

    pytrec_eval's ``recall.100`` of each query's single best hit is exactly its ``recall.1``: the run
    is cut to depth 1 in trec_eval's own order (score, then document id, descending).
    """
    top1, per_query_top1 = evaluate_run(qrels, truncate_run(run, 1), ("Recall@100",))
    mean["Recall@1"] = top1["Recall@100"]
    for qid, row in per_query_top1.items():
        per_query[qid]["Recall@1"] = row["Recall@100"]


def bright_summary(records: Sequence[dict[str, Any]]) -> str:
    """One line per model, head and BRIGHT setting of one root: the plain mean over its tasks."""
    suites: dict[tuple[str, str, str, str], list[dict[str, float]]] = {}
    for rec in records:
        data = rec["config"].get("bright")
        if data:
            root = str(Path(rec["config"]["data_source"]).parent)
            key = (rec["model_label"], rec["config"]["head"]["name"], data["suite"], root)
            suites.setdefault(key, []).append(rec["metrics"])
    roots = list(dict.fromkeys((suite, root) for _, _, suite, root in suites))
    names = dict(zip(roots, distinct_labels([suite for suite, _ in roots], [root for _, root in roots])))
    lines = []
    for (model, head, suite, root), tasks in suites.items():
        means = "  ".join(f"{m} {np.mean([t[m] for t in tasks]):.4f}" for m in SUMMARY_METRICS)
        lines.append(f"{model}  {head}  {names[suite, root]}: mean over {len(tasks)} tasks  {means}")
    return "\n".join(lines)
