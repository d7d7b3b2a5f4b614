"""Sweep cells that continue an earlier group's cells: one long run observed at several budgets.

A learning curve over budgets costs the sum of the budgets when every budget is its own run, and
only the largest when each budget is a checkpoint of one run. The second is fair only if the run up
to a checkpoint is the run a shorter budget would have been: true under a learning-rate schedule
that does not depend on the run's length (constant after a warm-up), false under a decay planned
for the longest budget. The trainer's resume check enforces it: a checkpoint whose schedule was
planned for its step count cannot be extended (:mod:`clipmag.train.checkpoint.resume_check`).

A group with ``continue_from: EARLIER`` gives each cell the final checkpoint of the finished cell of
``EARLIER`` at the same place (model, head, variant, seed), copied into the cell's own folder, and
the cell's ``--resume latest`` trains on from there to its own ``train.steps``. Its ``cell.json``
names the cell it continued (``continues``); ``clipmag-rerun-cell`` re-runs it from step 0, which
under a constant schedule must give the same numbers. A cell interrupted after it started resumes
from its own checkpoint, never from the earlier cell's again. It trains with the dropout of the run
it continues, as every resume does (:func:`clipmag.train.checkpoint.resume_check.resumed_loop`: a stored
checkpoint from before ``train.fast_dropout`` continues with torch's), so a curve's budgets are alike.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Sequence

from clipmag.train.checkpoint import CHECKPOINT_DIR
from clipmag.train.checkpoint.files import resolve_resume
from clipmag_experiments.cells.finished import unfinished_reason
from clipmag_experiments.design.grid import Cell

__all__ = ["continue_cell", "continued_cell"]


def continued_cell(cell: Cell, cells: Sequence[Cell]) -> Cell:
    """The cell of group ``cell.continue_from`` that ``cell`` continues (same model, head, variant, seed)."""
    place = (cell.model, cell.head, cell.variant, cell.seed)
    for other in cells:
        if other.group == cell.continue_from and (other.model, other.head, other.variant, other.seed) == place:
            return other
    raise ValueError(
        f"sweep cell {cell.label}: group {cell.continue_from!r} has no cell of model {cell.model}, head {cell.head}, "
        f"variant {cell.variant}, seed {cell.seed} to continue; give both groups the same models, heads and seeds"
    )


def continue_cell(cell: Cell, cells: Sequence[Cell]) -> Cell:
    """``cell`` ready to continue its earlier cell: that cell's checkpoints (the final one, and the best
    by validation when it kept one) copied into ``cell``'s folder unless ``cell`` has a checkpoint of
    its own, and ``continues`` set for its ``cell.json``."""
    if cell.continue_from is None:
        return cell
    earlier = continued_cell(cell, cells)
    if resolve_resume("latest", cell.directory) is None:
        reason = unfinished_reason(earlier)
        if reason is not None:
            raise ValueError(
                f"sweep cell {cell.label} continues {earlier.label}, which is not finished ({reason}); "
                f"run group {cell.continue_from!r} first"
            )
        if resolve_resume("latest", earlier.directory) is None:
            raise FileNotFoundError(
                f"sweep cell {cell.label} continues {earlier.label}, whose checkpoint is gone from "
                f"{earlier.directory / CHECKPOINT_DIR}; run that cell again (delete its results.json)"
            )
        target = cell.directory / CHECKPOINT_DIR
        partial = cell.directory / f".{CHECKPOINT_DIR}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        shutil.rmtree(target, ignore_errors=True)  # holds no checkpoint: at most a killed run's leftovers
        shutil.copytree(earlier.directory / CHECKPOINT_DIR, partial)
        partial.replace(target)  # whole or absent: a copy killed half-way is never a checkpoint
    return dataclasses.replace(cell, continues=str(earlier.directory))
