"""A sweep cell that would train exactly what a finished cell of the same sweep trained takes that
cell's results instead of training it again.

This happens by design where a group chooses each cell's variant from a grid (``choose_variant``):
when the grid picks the setting another group already ran - each head's loss scale chosen on a dev
split, and the choice is the paper's scale 20 - the chosen cell and the paper-setting cell are one
run; and where two grids share a point (a scale grid's scale 20 is a learning-rate grid's default
learning rate). Any cell about to run is looked up, chosen or not. On one code state and machine
a CPU run is deterministic, so training it twice would give the same bits for twice the time.

Two cells are the same run when their front end resolves their argument lists, each with its
``--output`` replaced by one placeholder, to the same config (:func:`clipmag.results.provenance.config_sha256`
of the resolved settings: defaults, config files and overrides all applied, so ``loss.scale=20.0``
given explicitly matches a config file's 20.0). The copy is honest about it: its ``cell.json``
names the run it shares (``same_run_as``), its ``results.json`` is that run's, unchanged (its
provenance, its checkpoint and export paths), and ``clipmag-rerun-cell`` re-runs it from its own
argument list. A finished cell that chose its own arguments (a scale grid at the rate a rate grid
chose) is compared by the argument list its ``cell.json`` recorded, what it ran. A cell with
evaluations always trains (they need an export in its own folder).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from clipmag.config.build import to_dict
from clipmag.registry.front_ends import get_front_end
from clipmag.results.provenance import config_sha256
from clipmag.results.record import RESULTS_FILE
from clipmag.storage.files import write_text_atomic
from clipmag_experiments.cells.finished import unfinished_reason
from clipmag_experiments.design.grid import Cell, recorded_description

__all__ = ["run_identity", "finished_twin", "share_results"]

PLACEHOLDER = "<cell folder>"


def run_identity(cell: Cell) -> str | None:
    """A hash of the config ``cell`` resolves to, its output folder aside; None when its front end
    cannot resolve arguments without running (no ``parse_args``)."""
    argv = list(cell.argv)
    if "--output" in argv[:-1]:
        argv[argv.index("--output") + 1] = PLACEHOLDER
    resolved = get_front_end(cell.kind).check(argv)
    return None if resolved is None else config_sha256(to_dict(resolved))


def _as_run(candidate: Cell) -> Cell | None:
    """``candidate`` with the arguments it ran with: a cell that chose its own (a scale grid at the
    rate another grid chose) ran the argument list its ``cell.json`` recorded; None without one."""
    if candidate.choice is None:
        return candidate
    argv = recorded_description(candidate.directory).get("argv")
    return dataclasses.replace(candidate, argv=[str(a) for a in argv]) if isinstance(argv, list) else None


def finished_twin(cell: Cell, cells: Sequence[Cell]) -> Cell | None:
    """A finished cell among ``cells`` (other folders) that is the same run as ``cell``, or None."""
    if cell.evaluations:
        return None
    same_place = [
        c
        for c in cells
        if c.directory != cell.directory
        and (c.kind, c.model, c.head, c.seed) == (cell.kind, cell.model, cell.head, cell.seed)
    ]
    if not same_place:
        return None
    identity = run_identity(cell)
    if identity is None:
        return None
    for candidate in same_place:
        ran = _as_run(candidate) if unfinished_reason(candidate) is None else None
        if ran is not None and run_identity(ran) == identity:
            return candidate
    return None


def share_results(cell: Cell, twin: Cell) -> Cell:
    """Give ``cell`` the results of ``twin`` (its cell.json names the twin; results.json copied
    as it is, written last so that a killed copy is not a finished cell)."""
    shared = dataclasses.replace(cell, same_run_as=str(twin.directory))
    shared.write_description()
    write_text_atomic(Path(cell.directory) / RESULTS_FILE, (twin.directory / RESULTS_FILE).read_text(encoding="utf-8"))
    return shared
