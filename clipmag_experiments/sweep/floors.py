"""``<sweep folder>/baselines.json``: what the sweep's evaluation sets give without learning, kept
with its results.

A zero-shot or recall figure needs its floor beside it: chance, the training set's majority class,
a pixel nearest neighbour, a random ranking. The data builder computes them with the set
(:mod:`image_text.data.baselines`); a sweep's prepare step copies them into the sweep folder, so the
archive carries them with the cells and the report prints them under its tables wherever the data
is not:

    python -m clipmag_experiments.sweep.floors data/emoji/baselines.json runs/clip_emoji
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from clipmag.config.entry import run_entry_point
from clipmag.errors import UserError

__all__ = ["FLOORS_FILE", "read_floors", "store_floors"]

FLOORS_FILE = "baselines.json"


def store_floors(source: str | Path, runs_dir: str | Path) -> Path:
    """Copy a data set's ``baselines.json`` into the sweep folder; the copy."""
    source, target = Path(source), Path(runs_dir) / FLOORS_FILE
    if not source.is_file():
        raise UserError(f"{source}: no such file; build the data set first (its builder writes {FLOORS_FILE})")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source, target)
    return target


def read_floors(folder: str | Path) -> dict[str, Any] | None:
    """The floors a sweep folder keeps, by evaluated split (None: it keeps none)."""
    path = Path(folder) / FLOORS_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def main(argv: Sequence[str]) -> Path:
    """``python -m clipmag_experiments.sweep.floors SOURCE RUNS_DIR``: a data set's baselines.json
    into a sweep folder (a sweep's prepare step)."""
    if len(argv) != 2 or any(word.startswith("-") for word in argv):
        raise UserError(f"expected SOURCE RUNS_DIR (a baselines.json and a sweep folder), got {' '.join(argv)!r}")
    target = store_floors(*argv)
    print(f"floors copied to {target}")
    return target


if __name__ == "__main__":
    run_entry_point(main)
