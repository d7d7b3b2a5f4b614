"""The README's account of ``make demo``, rendered from a stored demo run (``results/demo``).

The demo's figures - the symmetric task, the CLIP directions, the RAG rows and how long the whole
thing took - used to be typed into the README from a run nobody kept, so they could not be checked
and went stale with every change to the demo. A measured demo is now archived (its cells as any
sweep's, ``rag/`` the RAG rows' ``results.json``, ``make_demo_time.json`` the wall clock that
``/usr/bin/time`` wrote), and these blocks and values are what the files say.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clipmag_experiments.report.collect import tidy_rows
from clipmag_experiments.report.stored import StoredResults, runs_value
from clipmag_experiments.report.tables import aggregate, to_markdown

__all__ = ["BLOCKS", "VALUES"]

SWEEP = "demo"
STS_METRICS = ("spearman", "spearman_reversed")
CLIP_SHOWN = ("i2t_r1_head", "t2i_r1_head", "zeroshot_acc1_head")
RAG_METRICS = ("accuracy@5", "accuracy@20", "EM", "F1")
WALL_FILE = "make_demo_time.json"


def _group_table(stored: StoredResults, group: str, metrics: tuple[str, ...]) -> str:
    """A demo group's metrics per head or variant (x100, mean ± std over its seeds)."""
    table = aggregate(tidy_rows(stored.sweep(SWEEP).group(group)), metrics)
    return to_markdown(table).rstrip("\n")


def rag_rows(folder: Path) -> list[dict[str, Any]]:
    """The stored RAG rows (one ``results.json`` per retriever), in the order the run wrote them."""
    paths = sorted(
        sorted(folder.glob("*/results.json")), key=lambda p: json.loads(p.read_text(encoding="utf-8"))["created"]
    )
    if not paths:
        raise FileNotFoundError(f"{folder}: no RAG rows (<row>/results.json)")
    return [json.loads(p.read_text(encoding="utf-8")) for p in paths]


def rag_table(stored: StoredResults) -> str:
    """Retrieval accuracy and the reader's EM / F1 per retriever (x100), per QA set."""
    rows = rag_rows(stored.root / SWEEP / "rag")
    lines = ["| QA set | retriever | " + " | ".join(RAG_METRICS) + " |", "|---" * (len(RAG_METRICS) + 2) + "|"]
    for qa in rows[0]["metrics"]:
        for row in rows:
            metrics = row["metrics"][qa]
            values = " | ".join(f"{100 * metrics[m]:.1f}" if m in metrics else "-" for m in RAG_METRICS)
            lines.append(f"| {qa} ({metrics.get('num_questions', '?')} questions) | {row['row']} | {values} |")
    return "\n".join(lines)


def wall_minutes(stored: StoredResults, argument: str = "") -> str:
    """The measured wall clock of ``make demo``, from the file ``/usr/bin/time -o`` wrote."""
    record = json.loads((stored.root / SWEEP / WALL_FILE).read_text(encoding="utf-8"))
    return f"{record['wall_seconds'] / 60:.1f} minutes"


BLOCKS: dict[str, Callable[[StoredResults], str]] = {
    "demo-sts": lambda stored: _group_table(stored, "sts", STS_METRICS),
    "demo-clip": lambda stored: _group_table(stored, "clip", CLIP_SHOWN),
    "demo-rag": rag_table,
}
VALUES: dict[str, Callable[[StoredResults, str], str]] = {"demo-runs": runs_value(SWEEP), "demo-wall": wall_minutes}
