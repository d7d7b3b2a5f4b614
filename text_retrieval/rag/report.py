"""The RAG comparison table: retrieval accuracy@k and reader scores per retriever row, vs cosine.

Each row is one retriever (a model under a head, or BM25). The change column is relative to the
baseline row (the first row scored with the cosine head, else the first row), and its p-value is
an exact McNemar test over questions (:mod:`clipmag.results.significance`): a two-sided binomial test on
the questions where exactly one of the two rows is right, Holm-corrected over the rows compared
with the baseline (▲/▼ when the corrected p is below 0.05). It is a paired test because both rows
answer the same questions; with the few questions of the bundled set only large gaps reach it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clipmag.results.marks import mark
from clipmag.results.significance import Comparison, compare_with_baseline
from text_retrieval.rag.config import ACCURACY_AT

__all__ = ["Row", "comparison_table", "read_row", "question_outcomes", "QUESTIONS_SUFFIX"]

QUESTIONS_SUFFIX = ".questions.jsonl"


@dataclass
class Row:
    """One retriever's results: metrics per QA set and per-question outcomes (``{qid: {key: 0/1}}``)."""

    label: str
    head: str | None
    metrics: dict[str, dict[str, Any]]
    outcomes: dict[str, dict[str, dict[str, float]]]
    top_k: int  # passages the reader saw, which the outcomes' "hit within k" counts at


def question_outcomes(record: Mapping[str, Any], top_k: int) -> dict[str, float]:
    """A per-question record's outcomes for paired tests: a hit within each reported k (and
    ``top_k``), and the reader's EM, F1 and contains when it read."""
    rank = record.get("first_hit_rank")
    out = {f"accuracy@{k}": float(rank is not None and rank <= k) for k in sorted({*ACCURACY_AT, top_k})}
    out.update({key: float(record[key]) for key in ("EM", "F1", "contains") if key in record})
    return out


def read_row(folder: str | Path, top_k: int | None = None) -> Row:
    """A row from a result folder (``results.json`` plus ``<qa>.questions.jsonl``); ``top_k``
    defaults to the one the results were read with."""
    folder = Path(folder)
    path = folder / "results.json"
    if not path.is_file():
        raise FileNotFoundError(f"no RAG results in {folder} (expected {path})")
    record = json.loads(path.read_text(encoding="utf-8"))
    top_k = top_k or record["config"]["reader"]["top_k"]
    outcomes = {}
    for name in record["metrics"]:
        lines = (folder / f"{name}{QUESTIONS_SUFFIX}").read_text(encoding="utf-8").split("\n")
        rows = [json.loads(line) for line in lines if line.strip()]
        outcomes[name] = {r["id"]: question_outcomes(r, top_k) for r in rows}
    head = (record.get("head") or {}).get("head", {}).get("name")
    return Row(record["row"], head, record["metrics"], outcomes, top_k)


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def _comparisons(rows: Sequence[Row], base: Row, qa: str, key: str) -> dict[str, Comparison]:
    """Every other row against the baseline on one QA set and outcome (one Holm family), by position."""
    systems = {
        str(i): {0: {q: o[key] for q, o in row.outcomes.get(qa, {}).items() if key in o}}
        for i, row in enumerate(rows)
        if row is base or row.metrics.get(qa, {}).get(key) is not None
    }
    return compare_with_baseline(systems, str(next(i for i, row in enumerate(rows) if row is base)))


def _change(row: Row, base: Row, qa: str, key: str, comparison: Comparison | None) -> str:
    ours, theirs = row.metrics[qa].get(key), base.metrics[qa].get(key)
    if row is base or ours is None or theirs is None or comparison is None:
        return "-"
    relative = f" ({100 * (ours - theirs) / theirs:+.0f}%)" if theirs else ""
    text = f"{100 * (ours - theirs):+.1f}{relative}, p={comparison.p_holm:.2g}"
    return f"{text} {mark(comparison)}" if mark(comparison) else text


def comparison_table(rows: Sequence[Row], top_k: int = 5) -> str:
    """Markdown tables, one per QA set: accuracy@k, EM, F1, contains, and changes vs the baseline."""
    if not rows:
        return ""
    base = next((r for r in rows if r.head == "cosine"), rows[0])
    blocks = []
    for qa in rows[0].metrics:
        ks = [k for k in ACCURACY_AT if f"accuracy@{k}" in rows[0].metrics[qa]]
        reader = "EM" in rows[0].metrics[qa]
        header = ["retriever", *(f"acc@{k}" for k in ks)]
        header += ["EM", "F1", "contains"] if reader else []
        header += [f"acc@{top_k} vs {base.label}"] + ([f"EM vs {base.label}"] if reader else [])
        lines = [f"**{qa}** ({rows[0].metrics[qa]['num_questions']} questions, x100)", ""]
        lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        keys = [f"accuracy@{top_k}", *(["EM"] if reader else [])]
        tests = {key: _comparisons(rows, base, qa, key) for key in keys}
        for i, row in enumerate(rows):
            m = row.metrics.get(qa, {})
            cells = [row.label, *(_cell(m.get(f"accuracy@{k}")) for k in ks)]
            cells += [_cell(m.get(key)) for key in ("EM", "F1", "contains")] if reader else []
            cells += [_change(row, base, qa, key, tests[key].get(str(i))) for key in keys]
            lines.append("| " + " | ".join(cells) + " |")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"
