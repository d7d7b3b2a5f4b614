"""Packed cells: several cells of a local sweep at once, the machine's threads split between them.

A small model does not use two or more threads well (its matrices are too small to split), so a
sweep that runs one cell at a time leaves cores idle; ``pack: N`` runs up to N cells at once, each
in its own process with ``train.threads`` = the threads torch would use / N (at least 1), appended
to the cell's arguments so it wins over a group's own. The thread count is then part of the cell's
config and of its ``results.json`` (``numerics.torch_threads``): the last bits of a float result
shift with it (the order of a reduction), so a packed cell is not the same run as an unpacked one,
and a table whose finished cells ran with another thread count is refused
(:mod:`clipmag_experiments.sweep.numerics_check`): a table never compares cells that differ in it.

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

from clipmag_experiments.design.grid import Cell

__all__ = ["cell_threads", "packed_stages", "run_packed", "with_threads"]


def cell_threads(pack: int, available: int | None = None) -> int:
    """Threads of one of ``pack`` cells sharing ``available`` threads (default: torch's count now)."""
    return max(1, (available or torch.get_num_threads()) // pack)


def with_threads(cells: Sequence[Cell], threads: int) -> list[Cell]:
    """``cells`` with ``train.threads=threads`` last in their arguments (after a group's own)."""
    return [dataclasses.replace(c, argv=[*c.argv, f"train.threads={threads}"]) for c in cells]


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
