"""The qnorm/dnorm predictors as a sweep evaluation (``clipmag.registry.evaluations`` kind ``predict``).

Attached to an untuned cell (``train.steps=0``), whose export is the starting model itself, it
records both predictors' verdicts before fine-tuning next to the cells that then fine-tune that
model, so the report can set each verdict against the measured winner. ``main(argv)`` takes the
predictor's own arguments (:mod:`text_retrieval.predict.cli`) with ``--output`` naming a folder.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from clipmag.registry.evaluations import EvaluationResult
from clipmag.results.record import RESULTS_FILE
from text_retrieval.predict.cli import main as predict_main
from text_retrieval.predict.cli import parse_args as predict_parse_args
from text_retrieval.predict.config import PredictConfig

__all__ = ["main", "parse_args", "read_evaluation"]


def _predictor_argv(argv: Sequence[str]) -> list[str]:
    """The predictor's arguments with the sweep's ``--output FOLDER`` (the last one) made ``FOLDER/results.json``."""
    args = list(argv)
    if "--output" not in args:
        raise ValueError("the predict evaluation needs --output FOLDER")
    at = len(args) - 1 - args[::-1].index("--output")
    args[at + 1] = str(Path(args[at + 1]) / RESULTS_FILE)
    return args


def parse_args(argv: Sequence[str]) -> PredictConfig:
    """The checked settings ``main`` would run with."""
    return predict_parse_args(_predictor_argv(argv))


def main(argv: Sequence[str]) -> dict[str, Any]:
    """Run both predictors; ``--output FOLDER`` receives ``results.json`` (the predictor's JSON)."""
    return predict_main(_predictor_argv(argv))


def read_evaluation(folder: str | Path) -> EvaluationResult:
    """The predictors' numbers under the data they probed (no per-question outcomes)."""
    result = json.loads((Path(folder) / RESULTS_FILE).read_text(encoding="utf-8"))
    values = {"kappa_query": result["fisher"]["kappa_query"], "kappa_document": result["fisher"]["kappa_document"]}
    values["dcv"] = result["query_cv_ratio"]["dcv"]
    return EvaluationResult({str(result["settings"]["data"]): values}, {})
