"""Packed cells: several cells of a local sweep at once, the machine's threads split between them.

A small model does not use two or more threads well (its matrices are too small to split), so a
sweep that runs one cell at a time leaves cores idle; ``pack: N`` runs up to N cells at once, each
in its own process with ``train.threads`` = the threads torch would use / N (at least 1), appended
to the cell's arguments so it wins over a group's own. The thread count is then part of the cell's
config and of its ``results.json`` (``numerics.torch_threads``): the last bits of a float result
shift with it (the order of a reduction), so a packed cell is not the same run as an unpacked one,
and a group whose finished cells ran with another thread count is refused
(:func:`check_thread_counts`): a table never compares cells that differ in it.

Cells wait for what they read: a group starts once every earlier group is done (a choice, a
continuation or a shared run reads an earlier group's results), and a grid extension's cells run
one at a time after the rest of their group (each reads the choice the ones before it left).
Resuming is as without packing: finished cells are skipped, interrupted ones continue. Two cells of
one group that are the same run (``reuse_same_runs``) may run beside each other and both train: a
cell takes a twin's results only once the twin is finished.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import torch

from clipmag.errors import ConfigError
from clipmag.registry.front_ends import get_front_end
from clipmag.results.record import RESULTS_FILE, read_results
from clipmag.train.diverged_record import read_divergence
from clipmag_experiments.cells.finished import unfinished_reason
from clipmag_experiments.cells.thread_counts import mixed_thread_counts
from clipmag_experiments.design.grid import Cell

__all__ = ["cell_threads", "check_thread_counts", "packed_stages", "run_packed", "with_threads"]


def cell_threads(pack: int, available: int | None = None) -> int:
    """Threads of one of ``pack`` cells sharing ``available`` threads (default: torch's count now)."""
    return max(1, (available or torch.get_num_threads()) // pack)


def with_threads(cells: Sequence[Cell], threads: int) -> list[Cell]:
    """``cells`` with ``train.threads=threads`` last in their arguments (after a group's own)."""
    return [dataclasses.replace(c, argv=[*c.argv, f"train.threads={threads}"]) for c in cells]


def planned_threads(cell: Cell) -> int:
    """The thread count ``cell`` will run with: its resolved ``train.threads``, else torch's count."""
    resolved = get_front_end(cell.kind).check(cell.argv)
    pinned = getattr(getattr(resolved, "train", None), "threads", 0)
    return int(pinned) or torch.get_num_threads()


def recorded_threads(cell: Cell) -> int | None:
    """The thread count a finished cell's ``results.json`` records (None: written before it was)."""
    threads = (read_results(cell.directory / RESULTS_FILE).get("numerics") or {}).get("torch_threads")
    return int(threads) if threads is not None else None


def check_thread_counts(cells: Sequence[Cell], source: str) -> None:
    """Refuse a sweep that would put cells of different thread counts into one group's table: the
    finished cells' recorded counts and the unfinished cells' planned ones must agree per group."""
    runs = []
    for cell in cells:
        if read_divergence(cell.directory) is not None:  # an outcome: it runs no more
            continue
        if unfinished_reason(cell) is not None:
            runs.append((cell.group, f"{cell.label} would run", planned_threads(cell)))
        elif (threads := recorded_threads(cell)) is not None:
            runs.append((cell.group, f"{cell.label} ran", threads))
    mixed = mixed_thread_counts(runs)
    if mixed:
        raise ConfigError(
            f"{source}: {mixed}. Run with the count its finished cells ran with (the sweep's pack, or "
            "train.threads), or into another output_dir"
        )


def packed_stages(cells: Sequence[Cell]) -> list[list[Cell]]:
    """``cells`` in stages that may each run at once: per group in order, its grid cells together,
    then each grid-extension cell alone (it reads the choice the cells before it left)."""
    stages: list[list[Cell]] = []
    for group in dict.fromkeys(c.group for c in cells):
        members = [c for c in cells if c.group == group]
        stages.append([c for c in members if c.extends is None])
        stages += [[c] for c in members if c.extends is not None]
    return [stage for stage in stages if stage]


def run_packed(cells: Sequence[Cell], pack: int, run_one: Callable[[int, Cell], None]) -> None:
    """Run ``run_one(place, cell)`` for every cell, up to ``pack`` at once, stage by stage
    (:func:`packed_stages`; ``place`` is the cell's 1-based position in ``cells``). ``run_one``
    handles a cell's own failure; an error it raises stops the sweep once the running cells end."""
    place = {id(c): i for i, c in enumerate(cells, 1)}
    with ThreadPoolExecutor(max_workers=pack, thread_name_prefix="cell") as pool:
        for stage in packed_stages(cells):
            for future in [pool.submit(run_one, place[id(c)], c) for c in stage]:
                future.result()
