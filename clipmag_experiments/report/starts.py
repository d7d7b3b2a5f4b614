"""The numbers of the report's starting-point section: per start (a sweep ``models`` label) and test
set, the untuned model's scores and norm statistics next to every head fine-tuned from it, with paired
tests; :mod:`clipmag_experiments.report.starts_section` writes them as markdown.

A cell trained for zero steps (``run.steps == 0`` in its results) is the start itself, evaluated
untuned; the others are fine-tuned. For each fine-tuned group, start and test set the section gives:

* untuned nDCG@10 under cosine and dot, Cohen's d of document norms and the document-norm CV
  (the paper's precondition: relevance visible in the norms before training);
* each head's nDCG@10, mean +- std over seeds, against cosine: the mean per-query difference with
  its bootstrap interval, the query-level test with Holm's correction over the row's heads (the
  mark), and the paper's seed-level paired t-test beside it (:mod:`clipmag.results.significance`);
* each head's change from its own start (the untuned cell scored with the same head), tested the
  same way, so "the head improved" and "cosine got worse" read apart: a difference from cosine
  says nothing of which side moved; and the pairs the tested checkpoint saw;
* Cohen's d after fine-tuning per head, the learnable head's final exponents, and each qnorm/dnorm
  predictor's verdict (a ``predict`` evaluation on the untuned cell) against the measured winner
  and against the majority-class guess on the same cells.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from clipmag.results.marks import mark
from clipmag.results.significance import Comparison, compare_with_baseline
from clipmag.scoring.head_config import HEAD_NAMES
from clipmag_experiments.report.collect import CellResult

METRIC = "NDCG@10"
BASELINE = "cosine"

__all__ = ["HeadResult", "StartRow", "start_rows", "write_start_rows"]


@dataclass
class HeadResult:
    """One head fine-tuned from one start, on one test set, over seeds."""

    per_seed: dict[int, float] = field(default_factory=dict)
    per_query: dict[int, dict[str, float]] = field(default_factory=dict)
    cohens_d: list[float] = field(default_factory=list)
    comparison: Comparison | None = None  # against cosine; None for cosine itself
    from_start: Comparison | None = None  # against the untuned start scored with the same head
    chosen: set[str] = field(default_factory=set)  # variants a choose_variant group picked for it
    pairs_seen: list[int] = field(default_factory=list)  # per seed: the tested checkpoint's step x batch

    @property
    def mean(self) -> float:
        return float(np.mean(list(self.per_seed.values())))

    @property
    def std(self) -> float:
        values = list(self.per_seed.values())
        return float(np.std(values, ddof=1)) if len(values) > 1 else 0.0


@dataclass
class StartRow:
    group: str
    start: str
    dataset: str
    heads: dict[str, HeadResult]
    untuned: dict[str, float]  # head -> nDCG@10 of the start itself
    untuned_norms: dict[str, float]  # cohens_d, document_norm_cv
    untuned_per_query: dict[str, dict[str, float]] = field(default_factory=dict)  # head -> query -> score

    def marked(self, sign: str) -> list[str]:
        """Heads the corrected query-level test puts above (``▲``) or below (``▼``) cosine."""
        return [h for h, r in self.heads.items() if mark(r.comparison) == sign]


def _steps(cell: CellResult) -> int:
    return int(cell.results.get("run", {}).get("steps", -1))


def _effect(result: dict[str, Any]) -> dict[str, float]:
    diag = result.get("diagnostics") or {}
    out = {}
    d = (diag.get("document_norm_effect") or {}).get("cohens_d")
    if isinstance(d, (int, float)):
        out["cohens_d"] = float(d)
    cv = (diag.get("document_norm") or {}).get("cv")
    if isinstance(cv, (int, float)):
        out["document_norm_cv"] = float(cv)
    return out


def _pairs_seen(cell: CellResult) -> int | None:
    """The pairs the tested checkpoint trained on: its step times the batch (None: not recorded)."""
    step = (cell.results.get("checkpoint") or {}).get("step")
    batch = cell.results.get("run", {}).get("batch_size") or cell.cell.get("batch_size")
    if not isinstance(batch, int):
        batch = _batch_from_argv(cell.cell.get("argv") or [])
    return int(step) * batch if isinstance(step, int) and batch else None


def _batch_from_argv(argv: list[str]) -> int | None:
    found = [a.split("=", 1)[1] for a in argv if a.startswith("data.batch_size=")]
    return int(found[-1]) if found else None


def _change_from_start(head: str, result: HeadResult, start: dict[str, float]) -> Comparison | None:
    """The head's trained scores against its untuned start's, the start repeated for every seed (it
    is one deterministic model): the same tests as against cosine."""
    if not start or not result.per_query:
        return None
    systems = {"start": {s: start for s in result.per_query}, head: result.per_query}
    return compare_with_baseline(systems, "start").get(head)


def start_rows(cells: list[CellResult]) -> list[StartRow]:
    """One row per (fine-tuned group, start, test set) with a ``model`` label and retrieval metrics."""
    untuned: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    untuned_norms: dict[tuple[str, str], dict[str, float]] = {}
    untuned_queries: dict[tuple[str, str], dict[str, dict[str, float]]] = defaultdict(dict)
    tuned: dict[tuple[str, str, str], dict[str, HeadResult]] = defaultdict(dict)
    for c in cells:
        model = c.cell.get("model")
        if not model:
            continue
        for dataset, result in c.results["metrics"].items():
            if not isinstance(result.get(METRIC), (int, float)):
                continue
            if _steps(c) == 0:
                untuned[(model, dataset)][c.head] = float(result[METRIC])
                untuned_norms.setdefault((model, dataset), _effect(result))
                queries = {q: float(v[METRIC]) for q, v in (result.get("per_query") or {}).items()}
                untuned_queries[(model, dataset)][c.head] = queries
                continue
            head = tuned[(c.cell["group"], model, dataset)].setdefault(c.config, HeadResult())
            seed = int(c.cell["seed"])
            head.per_seed[seed] = float(result[METRIC])
            head.per_query[seed] = {q: float(v[METRIC]) for q, v in (result.get("per_query") or {}).items()}
            if c.cell.get("chosen"):
                head.chosen.add(str(c.cell["chosen"]["variant"]))
            if (pairs := _pairs_seen(c)) is not None:
                head.pairs_seen.append(pairs)
            effect = _effect(result)
            if "cohens_d" in effect:
                head.cohens_d.append(effect["cohens_d"])
    rows = []
    for (group, model, dataset), heads in tuned.items():
        base = heads.get(BASELINE)
        if base is None:  # e.g. a learning-rate grid: variants, no head to compare with
            continue
        comparisons = compare_with_baseline({name: head.per_query for name, head in heads.items()}, BASELINE)
        for name, comparison in comparisons.items():
            heads[name].comparison = comparison
        starts = untuned_queries.get((model, dataset), {})
        for name, head in heads.items():
            head.from_start = _change_from_start(name, head, starts.get(name, {}))
        order = [h for h in HEAD_NAMES if h in heads] + [h for h in heads if h not in HEAD_NAMES]
        rows.append(
            StartRow(
                group,
                model,
                dataset,
                {h: heads[h] for h in order},
                untuned.get((model, dataset), {}),
                untuned_norms.get((model, dataset), {}),
                starts,
            )
        )
    return sorted(rows, key=lambda r: (r.group, r.start, r.dataset))


def write_start_rows(rows: list[StartRow], path: Path) -> Path:
    """The section's numbers as JSON (for the README and for tests)."""
    data = [
        {
            "group": r.group,
            "start": r.start,
            "dataset": r.dataset,
            "untuned": r.untuned,
            "untuned_norms": r.untuned_norms,
            "heads": {
                h: {
                    "mean": x.mean,
                    "std": x.std,
                    "seeds": x.per_seed,
                    "cohens_d_after": float(np.mean(x.cohens_d)) if x.cohens_d else None,
                    "chosen": sorted(x.chosen),
                    "versus_cosine": x.comparison.to_dict() if x.comparison else None,
                    "versus_start": x.from_start.to_dict() if x.from_start else None,
                    "pairs_seen": x.pairs_seen,
                    "mark": mark(x.comparison),
                }
                for h, x in r.heads.items()
            },
        }
        for r in rows
    ]
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return path
