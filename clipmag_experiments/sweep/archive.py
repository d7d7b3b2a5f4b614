"""Copy a sweep's small result files (no weights) to another folder, e.g. one kept in git.

A sweep's folder holds checkpoints and exports (tens to hundreds of MB per cell) beside the few KB
that the report reads. ``archive_results(runs, dest)`` copies only those - every finished cell's
``cell.json``, ``results.json``, ``config.yaml``, ``metrics.jsonl`` and its evaluations'
``results.json`` - the record of every run a prepare step trained inside the sweep's folder (a start
the sweep pretrains: ``results.json``, ``config.yaml`` and ``metrics.jsonl``, no ``cell.json``; on
a fresh machine the step runs again, as its export is not archived) and the sweep's ``sweep.json``
(its protocol record), caption layout and floors (``baselines.json``), keeping the layout, so
``clipmag-report DEST`` rebuilds the report anywhere. Copied back into a fresh ``output_dir``, the
files let a ``choose_variant`` group read its selection group's scores; the cells themselves run
again there, as a finished cell must have the export its results name.

    python -m clipmag_experiments.sweep.archive runs/positive_regime results/positive_regime
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from clipmag.config.command_line import parse_cli, require_words
from clipmag.config.entry import run_entry_point
from clipmag.results.record import RESULTS_FILE
from clipmag_experiments.design.grid import CELL_FILE, EVALUATIONS_DIR
from clipmag_experiments.design.protocol import PROTOCOL_FILE
from clipmag_experiments.sweep.caption_layout import CAPTION_LAYOUT_FILE
from clipmag_experiments.sweep.floors import FLOORS_FILE

__all__ = ["ArchiveCommand", "archive_results", "main"]

RUN_FILES = (RESULTS_FILE, "config.yaml", "metrics.jsonl")  # what a training run writes beside its weights
CELL_FILES = (CELL_FILE, *RUN_FILES)


def archive_results(runs_dir: str | Path, dest: str | Path) -> list[Path]:
    """Copy the small files of every finished cell under ``runs_dir`` into ``dest``; the copies made."""
    runs_dir, dest = Path(runs_dir), Path(dest)
    copied = []
    kept = (PROTOCOL_FILE, CAPTION_LAYOUT_FILE, FLOORS_FILE)
    files = [runs_dir / name for name in kept if (runs_dir / name).is_file()]
    for results in sorted(runs_dir.rglob(RESULTS_FILE)):
        run = results.parent
        if (run / CELL_FILE).is_file():
            files += [run / name for name in CELL_FILES if (run / name).is_file()]
            files += sorted((run / EVALUATIONS_DIR).glob(f"*/{RESULTS_FILE}"))
        elif (run / "config.yaml").is_file() and EVALUATIONS_DIR not in run.relative_to(runs_dir).parts:
            files += [run / name for name in RUN_FILES if (run / name).is_file()]  # a prepare step's run
        # else an evaluation's results: taken with its cell
    for source in files:
        target = dest / source.relative_to(runs_dir)
        if target.is_file() and target.read_bytes() == source.read_bytes():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
        copied.append(target)
    return copied


@dataclass
class ArchiveCommand:
    """RUNS_DIR DEST: a sweep's output_dir, and where its small files go (same layout)."""

    runs_dir: str = ""
    dest: str = ""


def main(argv: Sequence[str]) -> None:
    """``python -m clipmag_experiments.sweep.archive RUNS_DIR DEST``."""
    cmd = parse_cli(ArchiveCommand, argv, {}, description=__doc__, positional=("runs_dir", "dest"))
    require_words(cmd, ("runs_dir", "dest"))
    copied = archive_results(cmd.runs_dir, cmd.dest)
    print(f"{len(copied)} files copied to {cmd.dest}")


if __name__ == "__main__":
    run_entry_point(main)
