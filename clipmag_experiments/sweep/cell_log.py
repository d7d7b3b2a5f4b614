"""A local sweep cell's log, ``<cell>/cell.log``, and how a failed cell is named.

A sweep on one machine runs on when one cell fails, as a SLURM array does when one job fails, so
what stopped the cell must stay on disk next to it: under ``torchrun`` everything the cell's
processes printed (the console shows it too), for a cell run in the sweep's own process the error
with its traceback. A rerun appends, so the log of an earlier attempt is never lost.
"""

from __future__ import annotations

import os
import subprocess
import sys
import traceback
from collections.abc import Sequence

from clipmag.errors import UserError
from clipmag_experiments.design.grid import Cell

__all__ = ["CELL_LOG", "CellFailed", "failure_reason", "run_logged"]

CELL_LOG = "cell.log"


class CellFailed(UserError):
    """A cell's processes exited with a non-zero status; what they printed is in its ``cell.log``."""

    def __init__(self, cell: Cell, status: int) -> None:
        self.status, self.log = status, cell.directory / CELL_LOG
        super().__init__(f"sweep cell {cell.label} failed with exit status {status}; its log: {self.log}")


def run_logged(cmd: Sequence[str], cell: Cell, echo: bool = True) -> None:
    """Run ``cmd`` for ``cell``, its output appended to the cell's log and, with ``echo``, on the
    console (a cell packed beside others keeps it to its log); raises :class:`CellFailed` on a
    non-zero exit status."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}  # lines as they come, not when a buffer fills
    with (cell.directory / CELL_LOG).open("a", encoding="utf-8") as log:
        log.write(f"$ {' '.join(cmd)}\n")
        with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env) as proc:
            assert proc.stdout is not None
            for line in proc.stdout:
                if echo:
                    sys.stdout.write(line)
                log.write(line)
                log.flush()
    if proc.returncode != 0:
        raise CellFailed(cell, proc.returncode)


def failure_reason(cell: Cell, err: Exception) -> str:
    """Why ``cell`` failed, naming its log, for the sweep's lines; an error raised in the sweep's
    process is appended to that log with its traceback."""
    if isinstance(err, CellFailed):
        return f"exit status {err.status}; its log: {err.log}"
    log = cell.directory / CELL_LOG
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a", encoding="utf-8") as file:
        file.write("".join(traceback.format_exception(err)))
    return f"{type(err).__name__}: {err}; its log: {log}"
