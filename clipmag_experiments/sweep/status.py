"""``clipmag-sweep status``: where every cell of a sweep stands, and why a failed one failed.

A cell is ``done`` when its results are finished on disk (:mod:`clipmag_experiments.cells.finished`, the
sweep's own test); otherwise it shows its latest job's SLURM state (``pending``, ``running``,
``failed``, ``timeout``, ``cancelled``, ...; ``jobs.json`` and ``sacct``), ``not submitted``, or
for a local sweep ``not run``. A cell whose job ended without finishing the cell shows the last
lines of the job's error log. Evaluations show the same way, under their cell.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from clipmag.results.record import RESULTS_FILE
from clipmag_experiments.cells.finished import unfinished_reason
from clipmag_experiments.design.expansion import expand
from clipmag_experiments.design.grid import Cell, SweepConfig
from clipmag_experiments.design.selection import selected
from clipmag_experiments.slurm.jobs import LOG_DIR, JobsRecord, job_states

__all__ = ["sweep_status"]

LOG_LINES = 8


def _error_log(folder: Path, job: str) -> str:
    """The last lines of the job's first task's stderr (submitit names it ``<job>_0_log.err``)."""
    path = folder / LOG_DIR / job / f"{job}_0_log.err"
    if not path.is_file():
        return f"      (no log at {path})"
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()[-LOG_LINES:]
    return "\n".join(f"      | {line}" for line in lines) + f"\n      ({path})"


def _rows(cells: Sequence[Cell], record: JobsRecord) -> list[tuple[str, bool, str | None]]:
    """(label, finished on disk, latest job) of every cell and evaluation, in sweep order."""
    rows = []
    for cell in cells:
        rows.append((cell.label, unfinished_reason(cell) is None, record.latest(cell.label)))
        for evaluation in cell.evaluations:
            label = f"{cell.label}/{evaluation.folder_name}"
            done = (cell.evaluation_folder(evaluation) / RESULTS_FILE).is_file()
            rows.append((label, done, record.latest(label)))
    return rows


def sweep_status(cfg: SweepConfig, only: Sequence[str] = ()) -> str:
    """One line per cell and evaluation (state, job, label), the error log under each failed one,
    then the count of each state."""
    folder = Path(cfg.output_dir)
    record = JobsRecord(folder)
    rows = _rows([c for c in expand(cfg) if selected(c, only)], record)
    states = job_states([job for _, _, job in rows if job])
    lines, counts = [], {}
    for label, done, job in rows:
        if done:
            state = "done"
        elif job:
            state = states.get(job, "unknown").lower()
        else:
            state = "not submitted" if cfg.launcher == "slurm" else "not run"
        counts[state] = counts.get(state, 0) + 1
        lines.append(f"{state:<14} {job or '-':>10}  {label}")
        if job and not done and state not in ("pending", "running", "requeued", "configuring", "completing"):
            lines.append(_error_log(folder, job))
    summary = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
    return "\n".join([*lines, "", f"{len(rows)} cells and evaluations: {summary}"])
