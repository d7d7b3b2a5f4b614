"""Retrieval scores of a cell's export as a sweep evaluation (``clipmag.registry.evaluations`` kind
``retrieval``), with one score per query.

Why: a sweep that chooses each head's learning rate on a dev split must say how far the chosen rate
is ahead of its runner-up, with the paired standard error over the dev queries, or a choice inside
the noise reads as a tuned one. A run keeps its dev curve as means only; attached to the selection
cells, this evaluation scores each cell's tested export on the dev split again and keeps every
query's nDCG@10, so the margin and its error come from the same queries for every candidate.

``main(argv)`` takes :mod:`text_retrieval.evaluation.cli`'s own arguments (``--data DEV --split
dev``) with the sweep's ``--model <cell>/export --output FOLDER``; the folder receives the
evaluation CLI's record per data set and ``results.json`` gathering them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from clipmag.registry.evaluations import EvaluationResult
from clipmag.results.record import RESULTS_FILE
from clipmag.storage.files import write_text_atomic
from text_retrieval.evaluation.cli import EvalTextConfig
from text_retrieval.evaluation.cli import main as evaluate_main
from text_retrieval.evaluation.cli import parse_args as evaluate_parse_args

__all__ = ["main", "parse_args", "read_evaluation"]

KEPT = "NDCG@10"


def parse_args(argv: Sequence[str]) -> EvalTextConfig:
    """The checked settings ``main`` would run with (nothing runs)."""
    return evaluate_parse_args(argv)


def main(argv: Sequence[str]) -> dict[str, Any]:
    """Score the export on every ``--data`` set; ``results.json`` holds each set's metrics and its
    per-query nDCG@10, written last, so its presence means the evaluation finished. It names the code
    that scored (``provenance``): only this file is archived with a cell, and a choice read from it must
    say which commit's scoring it rests on."""
    cfg = parse_args(argv)
    records = evaluate_main(argv)
    if not records:  # a rank that only helped encode: rank 0 writes the summary
        return {}
    summary = {
        "split": cfg.split,
        "provenance": records[0]["provenance"],  # every set is scored by one command, one code state
        "versions": records[0]["versions"],
        "metrics": {r["dataset_label"]: r["metrics"] for r in records},
        "per_query": {
            r["dataset_label"]: {q: {KEPT: row[KEPT]} for q, row in r.get("per_query", {}).items()} for r in records
        },
    }
    write_text_atomic(Path(cfg.output) / RESULTS_FILE, json.dumps(summary, indent=1) + "\n")
    return summary


def read_evaluation(folder: str | Path) -> EvaluationResult:
    """Each set's metrics and its queries' nDCG@10 (a paired test over queries reads them)."""
    summary = json.loads((Path(folder) / RESULTS_FILE).read_text(encoding="utf-8"))
    return EvaluationResult(summary["metrics"], summary["per_query"])
