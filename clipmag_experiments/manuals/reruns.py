"""The manuals' table of re-runs: stored sweep cells trained again at a later commit
(``clipmag-rerun-cell --record results/reruns/<sweep>.json``), rendered from that file.

It answers whether today's code still makes the stored results: per cell, the two commits, how
many numbers were compared, whether exactly (same commit and numerics) or within the tolerance,
how many differ and by how much at most.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import PurePath

from clipmag_experiments.report.stored import StoredResults
from clipmag_experiments.sweep.rerun_comparison import read_records

__all__ = ["BLOCKS", "cell_label"]

RERUN_FILES = {"reruns-positive-regime": "positive_regime.json"}


def _short(code: str) -> str:
    return code.removeprefix("commit ")[:7] if code.startswith("commit ") and "dirty" not in code else code


def cell_label(cell: str) -> str:
    """A stored cell as the repository names it (``results/<sweep>/...``), not as the machine that
    re-ran it did (``/work/main/results/...``); a cell outside a ``results`` folder keeps its path."""
    parts = PurePath(cell).parts
    return str(PurePath(*parts[parts.index("results") :])) if "results" in parts else cell


def rerun_table(stored: StoredResults, name: str) -> str:
    """One row per re-run cell of the file ``results/reruns/<name>``."""
    entries = read_records(stored.root / "reruns" / name)
    lines = [
        "| cell | stored at | re-run at | CPU | numbers compared | compared how | differ | largest difference |",
        "|---" * 8 + "|",
    ]
    for e in entries:
        how = "exactly" if e["exact"] else f"within {e['tolerance']:g}"
        lines.append(
            f"| `{cell_label(e['cell'])}` | `{_short(e['stored_code'])}` | `{_short(e['rerun_code'])}` | {e['cpu']} | "
            f"{e['compared']} | {how} | {e['differ']} | {e['largest_difference']:.2g} |"
        )
    return "\n".join(lines)


BLOCKS: dict[str, Callable[[StoredResults], str]] = {
    block: (lambda stored, name=name: rerun_table(stored, name)) for block, name in RERUN_FILES.items()
}
