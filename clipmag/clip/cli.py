"""Command line of the image-text trainer (``scripts/train_clip.py``, ``clipmag-train-clip``, sweeps).

``main(argv)`` parses ``[--config YAML] [--flag value ...] [key=value ...]`` into a checked
``ClipConfig`` and hands it to the core run driver; under torchrun every rank calls it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from clipmag.config.entry import run_entry_point
from clipmag.train.cost import CellCost
from clipmag.train.run import run_training

from .config import parse_args
from .cost import clip_cell_cost
from .task import ClipTask


def cell_cost(argv: Sequence[str], world_size: int) -> CellCost:
    """What one run of ``argv`` on ``world_size`` ranks costs (``clipmag-sweep plan``)."""
    return clip_cell_cost(parse_args(argv), world_size)


def main(argv: Sequence[str]) -> dict[str, Any]:
    """Train, test the export and write ``results.json``; returns the results record (rank 0)."""
    return run_training(parse_args(argv), ClipTask)


def entry() -> None:
    """Console script ``clipmag-train-clip``."""
    run_entry_point(main)


if __name__ == "__main__":  # torchrun -m clipmag.clip.cli
    entry()
