"""The sweep's refusal to put runs that computed differently into one table
(:mod:`clipmag_experiments.cells.numerics`): before any cell runs, the numerics every finished cell
recorded and those every unfinished cell would run with here - its thread count and the autocast
its ``train.precision`` resolves to on this machine - must agree per table.

A sweep resumed on another class of CPU is the case it exists for: ``precision: auto`` trains in
bf16 on AVX-512 BF16 or AMX and in fp32 on AVX2, so the rest of a start's runs would silently differ
from its first ones. It asks again after restoring an archive's cells, which then count as finished.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from clipmag.errors import ConfigError
from clipmag.registry.front_ends import get_front_end
from clipmag.results.record import RESULTS_FILE, read_results
from clipmag.runtime.precision import autocast_dtype
from clipmag.train.diverged_record import read_divergence
from clipmag_experiments.cells.finished import unfinished_reason
from clipmag_experiments.cells.numerics import mixed_numerics, numerics_key, table_of
from clipmag_experiments.design.grid import Cell
from clipmag_experiments.sweep.restore import archived_run

__all__ = ["check_numerics", "planned_numerics"]


def planned_numerics(cell: Cell) -> dict[str, Any]:
    """The numerics ``cell`` would record if it ran here now: its resolved ``train.threads`` (else
    torch's count) and ``train.precision`` on the device ``train.device`` picks."""
    train = getattr(get_front_end(cell.kind).check(cell.argv), "train", None)
    cuda = getattr(train, "device", "auto") == "cuda" or (
        getattr(train, "device", "auto") == "auto" and torch.cuda.is_available()
    )
    dtype = autocast_dtype(getattr(train, "precision", "auto"), torch.device("cuda" if cuda else "cpu"))
    return {
        "torch_threads": int(getattr(train, "threads", 0)) or torch.get_num_threads(),
        "autocast": str(dtype).replace("torch.", "") if dtype is not None else "fp32",
    }


def _archived_numerics(cell: Cell, archive: Path | None, output_dir: Path | None) -> dict[str, Any] | None:
    """The numerics of ``cell``'s archived run, where the sweep would restore it; None otherwise."""
    if archive is None or output_dir is None:
        return None
    source, _ = archived_run(cell, archive, output_dir)
    if source is None:
        return None
    return read_results(source / RESULTS_FILE).get("numerics") or None


def check_numerics(
    cells: Sequence[Cell], source: str, archive: Path | None = None, output_dir: Path | None = None
) -> None:
    """Refuse a sweep that would put cells of different numerics into one table: the finished
    cells' recorded numerics (a cell in ``archive``, the sweep's ``restore_from``, counts as finished
    under ``output_dir``) and the unfinished cells' planned ones must agree per start (per group
    where a cell names no model). A finished cell that recorded none (older code) is not counted."""
    runs = []
    for cell in cells:
        if read_divergence(cell.directory) is not None:  # an outcome: it runs no more
            continue
        table = table_of(cell.model, cell.group)
        finished = unfinished_reason(cell) is None
        if finished:
            recorded = read_results(cell.directory / RESULTS_FILE).get("numerics")
        else:
            recorded = _archived_numerics(cell, archive, output_dir)
        if recorded:
            runs.append((table, f"{cell.label} ran", numerics_key(recorded)))
        elif not finished:
            runs.append((table, f"{cell.label} would run", numerics_key(planned_numerics(cell))))
    mixed = mixed_numerics(runs)
    if mixed:
        raise ConfigError(
            f"{source}: {mixed}. Run its cells on a machine like the one its finished cells ran on, with their "
            "thread count (the sweep's pack, or train.threads) and precision, or into another output_dir"
        )
