"""A file of re-runs: what ``clipmag-rerun-cell --record FILE`` keeps of each comparison.

A stored result says which commit made it; whether today's code still makes it is a separate,
measured fact. Each ``--record`` adds one entry per cell to a JSON file (an earlier entry of the
same cell is replaced): the two code states, the CPU, whether the comparison was exact, how many
numbers it compared, how many differ and the largest difference, and the first differing numbers.
The manuals render their table of re-runs from such files (``results/reruns/``), not by hand.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clipmag.runtime.machine import cpu_name
from clipmag.storage.files import write_text_atomic

if TYPE_CHECKING:
    from clipmag_experiments.sweep.rerun import Comparison

__all__ = ["record_comparison", "read_records"]

KEPT_DIFFERENCES = 10


def _entry(comparison: Comparison) -> dict[str, Any]:
    return {
        "cell": str(comparison.cell),
        "stored_code": comparison.codes[0],
        "rerun_code": comparison.codes[1],
        "cpu": cpu_name(),
        "exact": comparison.exact,
        "reasons": comparison.reasons,
        "tolerance": comparison.tolerance,
        "compared": comparison.compared,
        "differ": len(comparison.differences),
        "largest_difference": comparison.largest,
        "differences": [[d.name, d.stored, d.rerun] for d in comparison.differences[:KEPT_DIFFERENCES]],
    }


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """The entries of a re-run file, in the order they were first recorded."""
    return list(json.loads(Path(path).read_text(encoding="utf-8"))["reruns"])


def record_comparison(path: str | Path, comparison: Comparison) -> Path:
    """Add ``comparison`` to the re-run file at ``path`` (created if absent), replacing its cell's entry."""
    path = Path(path)
    entries = read_records(path) if path.is_file() else []
    entry = _entry(comparison)
    found = [i for i, e in enumerate(entries) if e["cell"] == entry["cell"]]
    if found:
        entries[found[0]] = entry
    else:
        entries.append(entry)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_text_atomic(path, json.dumps({"reruns": entries}, indent=1) + "\n")
