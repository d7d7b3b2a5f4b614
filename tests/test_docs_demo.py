"""The README's demo figures come from a stored demo run: the RAG rows and the wall clock are read
from the files the measured run left, and a results root without them renders nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clipmag_experiments.manuals.demo import BLOCKS, VALUES
from clipmag_experiments.report.stored import StoredResults


def _rag_row(folder: Path, name: str, created: str, acc5: float, f1: float) -> None:
    folder.mkdir(parents=True)
    metrics = {"nq": {"accuracy@5": acc5, "accuracy@20": 0.9, "EM": 0.05, "F1": f1, "num_questions": 40}}
    record = {"row": name, "created": created, "metrics": metrics}
    (folder / "results.json").write_text(json.dumps(record), encoding="utf-8")


def test_rag_rows_and_wall_clock_are_read_from_the_stored_demo(tmp_path):
    rag = tmp_path / "demo" / "rag"
    _rag_row(rag / "bm25", "bm25", "2026-12-04T10:00:02", 0.6, 0.15)
    _rag_row(rag / "cosine", "minilm (cosine)", "2026-12-04T10:00:01", 0.7, 0.192)
    (tmp_path / "demo" / "make_demo_time.json").write_text('{"wall_seconds": 1134.0}', encoding="utf-8")
    stored = StoredResults(tmp_path)

    lines = BLOCKS["demo-rag"](stored).splitlines()
    assert lines[2] == "| nq (40 questions) | minilm (cosine) | 70.0 | 90.0 | 5.0 | 19.2 |"  # written first
    assert lines[3].startswith("| nq (40 questions) | bm25 | 60.0 |")
    assert VALUES["demo-wall"](stored, "") == "18.9 minutes"


def test_without_a_stored_demo_the_blocks_are_not_rendered(tmp_path):
    stored = StoredResults(tmp_path)
    for render in (BLOCKS["demo-sts"], BLOCKS["demo-clip"], BLOCKS["demo-rag"]):
        with pytest.raises(FileNotFoundError):
            render(stored)
