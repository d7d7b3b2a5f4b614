"""The points a magnitude predictor is tested on, read from stored sweeps: per (start, test set,
budget) the measured change of each magnitude head against cosine, and per (start, test set) the
diagnostics measured before fine-tuning.

A point is one fine-tuned group's (start, test set): the mean nDCG@10 over seeds of ``qnorm`` and of
``dnorm`` minus that of ``cosine`` in the same group (so each head at the setting the group gave it,
dev-chosen where the group chose). Its budget is the pairs a run saw (``train.steps`` x
``data.batch_size`` x ranks). Grid cells (a ``variant``) and untuned cells are not points.

Diagnostics come from two places, later ones filling what earlier ones lack:

* an untuned cell (``train.steps=0``) of the same sweeps: its test results' Cohen's d of document
  norms and both sides' norm CV (the raw norms do not depend on the head it scored with);
* ``clipmag-start-diagnostics`` records (a ``results.json`` with ``sets``, given as a file or a
  folder, or found as the ``start-diagnostics`` evaluation of an untuned cell), which add the Fisher
  predictor per test set.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clipmag.registry.evaluations import get_evaluation
from clipmag.results.record import RESULTS_FILE
from clipmag_experiments.report.collect import CellResult, find_cells

__all__ = ["MAGNITUDE_HEADS", "Point", "run_budget", "sweep_points", "untuned_diagnostics", "diagnostics_records"]

METRIC = "NDCG@10"
BASELINE = "cosine"
MAGNITUDE_HEADS = ("qnorm", "dnorm")
START_DIAGNOSTICS = "start-diagnostics"  # the registered sweep evaluation that records a start's diagnostics


@dataclass
class Point:
    """One (start, test set, budget) of one fine-tuned group: each magnitude head's change against cosine."""

    sweep: str
    group: str
    start: str
    dataset: str
    budget: int
    deltas: dict[str, float]  # head -> mean nDCG@10 over seeds minus cosine's
    seeds: int
    diagnostics: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))


def _steps(cell: CellResult) -> int:
    return int(cell.results.get("run", {}).get("steps", -1))


def run_budget(cell: CellResult) -> int:
    """Pairs one run saw: steps x batch x ranks, from the config its results record."""
    config = (cell.results.get("provenance") or {}).get("config") or {}
    batch = int((config.get("data") or {}).get("batch_size", 0))
    return _steps(cell) * batch * int(cell.results["run"].get("world_size", 1))


def _retrieval_scores(cell: CellResult) -> dict[str, float]:
    return {
        dataset: float(result[METRIC])
        for dataset, result in cell.results.get("metrics", {}).items()
        if isinstance(result.get(METRIC), (int, float))
    }


def sweep_points(sweep_dir: str | Path, cells: Sequence[CellResult] | None = None) -> list[Point]:
    """The points of one stored sweep (module docstring); a group without cosine and a magnitude head
    on the same start and test set gives none."""
    cells = find_cells(sweep_dir) if cells is None else cells
    scores: dict[tuple[str, str, str], dict[str, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    budgets: dict[tuple[str, str], int] = {}
    for cell in cells:
        if _steps(cell) <= 0 or cell.cell.get("variant") or not cell.cell.get("model"):
            continue
        group, start = str(cell.cell["group"]), str(cell.cell["model"])
        budgets[(group, start)] = run_budget(cell)
        for dataset, value in _retrieval_scores(cell).items():
            scores[(group, start, dataset)][cell.head][int(cell.cell["seed"])] = value
    points = []
    for (group, start, dataset), heads in sorted(scores.items()):
        if BASELINE not in heads:
            continue
        base = heads[BASELINE]
        deltas = {}
        for head in MAGNITUDE_HEADS:
            seeds = sorted(set(heads.get(head, {})) & set(base))
            if seeds:
                deltas[head] = sum(heads[head][s] - base[s] for s in seeds) / len(seeds)
        if deltas:
            seeds = len(set(base).intersection(*(heads[h] for h in deltas)))
            points.append(Point(Path(sweep_dir).name, group, start, dataset, budgets[(group, start)], deltas, seeds))
    return points


def untuned_diagnostics(cells: Iterable[CellResult]) -> dict[tuple[str, str], dict[str, float]]:
    """(start, test set) -> Cohen's d and norm CVs of the untuned cells' test results."""
    found: dict[tuple[str, str], dict[str, float]] = {}
    for cell in cells:
        if _steps(cell) != 0 or not cell.cell.get("model"):
            continue
        for dataset, result in cell.results.get("metrics", {}).items():
            diag = result.get("diagnostics") or {}
            values = {
                "cohens_d": (diag.get("document_norm_effect") or {}).get("cohens_d"),
                "query_norm_cv": (diag.get("query_norm") or {}).get("cv"),
                "document_norm_cv": (diag.get("document_norm") or {}).get("cv"),
            }
            clean = {k: float(v) for k, v in values.items() if isinstance(v, (int, float))}
            if clean:
                found.setdefault((str(cell.cell["model"]), dataset), clean)
    return found


def diagnostics_records(
    paths: Iterable[str | Path], cells: Iterable[CellResult] = ()
) -> dict[tuple[str, str], dict[str, float]]:
    """(start, test set) -> metrics of the start-diagnostics records at ``paths`` (files or folders
    holding ``results.json``) and of those attached to untuned ``cells`` (labelled by the cell's start)."""
    found: dict[tuple[str, str], dict[str, float]] = {}
    sources: list[tuple[Path, str | None]] = [(Path(p), None) for p in paths]
    for cell in cells:
        attached = cell.directory / "evaluations" / START_DIAGNOSTICS / RESULTS_FILE
        if _steps(cell) == 0 and attached.is_file():
            sources.append((attached, str(cell.cell.get("model"))))
    for path, label in sources:
        file = path / RESULTS_FILE if path.is_dir() else path
        try:
            record = json.loads(file.read_text(encoding="utf-8"))
            sets, start = record["sets"], label or str(record["start"])
        except (OSError, KeyError, TypeError, json.JSONDecodeError) as err:
            what = "not a start-diagnostics record (clipmag-start-diagnostics --output)"
            raise ValueError(f"{file}: {what}: {err}") from None
        metrics = get_evaluation(START_DIAGNOSTICS).read(file.parent).metrics  # its reader names the numbers
        for dataset in sets:
            found.setdefault((start, dataset), {}).update(metrics.get(dataset, {}))
    return found
