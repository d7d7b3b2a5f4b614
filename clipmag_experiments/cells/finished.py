"""Whether a sweep cell is finished: a results file that parses, belongs to the cell and names what
it tested, not merely a file called ``results.json``.

A cell restored from an earlier sitting's archive (:mod:`clipmag_experiments.sweep.restore`) is
finished without the checkpoint its results name: that stayed on the machine that trained it. So is
a cell that took such a cell's results (``same_run_as``): the checkpoint its results name is the
restored cell's.

A truncated or foreign ``results.json`` (a killed copy, another run's file) taken as "finished"
would put a broken or wrong cell into the report; the sweep asks this module instead and re-runs
the cell (its trainer resumes a partial run) when the answer is no, saying why.
"""

from __future__ import annotations

from pathlib import Path

from clipmag.results.record import RESULTS_FILE, read_results
from clipmag_experiments.cells.restored import restored_from
from clipmag_experiments.design.grid import Cell, recorded_description

__all__ = ["unfinished_reason"]


def unfinished_reason(cell: Cell) -> str | None:
    """None when ``cell`` is finished, else why not (for the sweep's log line)."""
    path = cell.directory / RESULTS_FILE
    if not path.is_file():
        return "no results.json"
    try:
        record = read_results(path)
    except ValueError as err:
        return f"its results.json is unreadable ({err})"
    head = record["head"].get("head", {}).get("name")
    if cell.head and head != cell.head:
        return f"its results.json is of head {head!r}, not the cell's {cell.head!r}"
    seed = record["run"].get("seed")
    if seed is not None and int(seed) != cell.seed:
        return f"its results.json is of seed {seed}, not the cell's {cell.seed}"
    tested = (record.get("checkpoint") or {}).get("path")
    if tested and not Path(tested).exists() and restored_from(_trained_in(cell.directory)) is None:
        return f"its results.json names {tested}, which is not there"
    return None


def _trained_in(cell_dir: Path) -> Path:
    """The folder of the run whose results ``cell_dir`` holds: the cell its ``cell.json`` says it
    shares a run with, else its own."""
    shared = recorded_description(cell_dir).get("same_run_as")
    return Path(shared) if isinstance(shared, str) and shared else cell_dir
