"""Re-run one finished sweep cell from its record and compare its numbers with the stored ones.

``clipmag-rerun-cell CELL_DIR [--output DIR] [--tolerance X]``: a stored result is only evidence if
running the recorded command again gives it back. The cell's ``cell.json`` holds the exact argument
list it trained with (a chosen variant included), and its results the settings it took from
elsewhere (``train.fast_dropout=false`` for a run from before the key); the re-run trains it into a
fresh folder (never the stored cell; under torchrun when the cell ran on several processes) and compares every number
of the two ``results.json``: the test metrics, the last validation and the head record (learned
gammas). Evaluations attached to the cell are not re-run. Prints the differences; exits 1 on any.

How the two are compared, and the file of re-runs that ``--record`` keeps:
:mod:`clipmag_experiments.sweep.rerun_comparison`.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clipmag.config.checks import NonNegativeFloat
from clipmag.config.command_line import field_flags, parse_cli
from clipmag.config.entry import run_entry_point
from clipmag.errors import ConfigError
from clipmag.results.provenance import code_state, describe_code, same_code
from clipmag.results.record import RESULTS_FILE, read_results
from clipmag.runtime.logs import logger, setup_logging
from clipmag.storage.user_files import read_json
from clipmag.train.checkpoint.predating import recorded_overrides
from clipmag_experiments.design.grid import CELL_FILE, Cell
from clipmag_experiments.sweep.rerun_comparison import Comparison, compare_results, format_comparison, record_comparison

__all__ = ["DEFAULT_TOLERANCE", "RerunCommand", "rerun_cell", "rerun_main"]

# Measured per machine (docs/experiments.md, "How much the demo varies"): text scores move by a few
# tenths of a point x100 between CPU classes, the 400-step CLIP R@1 by up to 2 points.
DEFAULT_TOLERANCE = 0.02


def _read_cell(folder: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    path = folder / CELL_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{folder}: no {CELL_FILE}; give a sweep cell folder (RUN_DIR/GROUP/MODEL/HEAD/seedN)")
    cell = read_json(path)
    argv = cell.get("argv") if isinstance(cell, dict) else None
    if not isinstance(argv, list) or "--output" not in argv[:-1] or "kind" not in cell:
        raise ValueError(f"{path}: expected a sweep cell record with 'kind' and an 'argv' holding --output")
    if not (folder / RESULTS_FILE).is_file():
        raise FileNotFoundError(
            f"{folder}: no {RESULTS_FILE}; the cell has not finished, so there is nothing to compare"
        )
    return cell, read_results(folder / RESULTS_FILE)


def _fresh_folder(output: Path, cell: Path) -> Path:
    if output.resolve() == cell.resolve() or cell.resolve() in output.resolve().parents:
        raise ValueError(f"--output {output}: inside the stored cell {cell}; give a folder of its own")
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        raise ValueError(f"--output {output}: exists and is not an empty folder; give a new one")
    return output


def _train(record: Mapping[str, Any], stored: Mapping[str, Any], output: Path) -> dict[str, Any]:
    """Run the recorded argument list with ``--output`` pointing at ``output``, and the settings a
    stored run took from elsewhere than its arguments as it recorded them (``train.fast_dropout=false``
    for a run from before the key, or one that continued such a run); its results record."""
    argv = [*record["argv"], *recorded_overrides((stored.get("provenance") or {}).get("config"))]
    argv[argv.index("--output") + 1] = str(output)
    world_size = int((stored.get("run") or {}).get("world_size") or 1)
    cell = Cell(
        str(record.get("group", "")),
        str(record["kind"]),
        record.get("model"),
        record.get("head"),
        record.get("variant"),
        int(record.get("seed", 0)),
        output,
        argv,
        chosen=record.get("chosen"),
        sweep_sha256=record.get("sweep_config_sha256"),
    )
    from clipmag_experiments.sweep.run import run_cell  # the trainers' core: not for --help

    run_cell(cell, "torchrun" if world_size > 1 else "inprocess", world_size)
    return read_results(output / RESULTS_FILE)


def rerun_cell(cell: str | Path, output: str | Path | None = None, tolerance: float = DEFAULT_TOLERANCE) -> Comparison:
    """Re-run the finished cell in folder ``cell`` into ``output`` (new or empty; default a temporary
    folder, removed afterwards) and compare its results with the stored ones."""
    cell = Path(cell)
    record, stored = _read_cell(cell)
    recorded = (stored.get("provenance") or {}).get("command", {}).get("cwd")
    if recorded and Path(recorded).resolve() != Path.cwd().resolve():
        logger.warning("%s: the cell ran in %s; its relative paths are read from here, %s", cell, recorded, os.getcwd())
    code = (stored.get("provenance") or {}).get("code")
    if not same_code(code, code_state()):
        logger.warning("%s: recorded at %s, re-run at %s", cell, describe_code(code), describe_code(code_state()))
    if output is not None:
        rerun = _train(record, stored, _fresh_folder(Path(output), cell))
    else:
        with tempfile.TemporaryDirectory(prefix="clipmag-rerun-") as folder:
            rerun = _train(record, stored, Path(folder))
    return compare_results(stored, rerun, tolerance, cell)


@dataclass
class RerunCommand:
    """``cell``: a finished cell's folder; ``output``: where the re-run trains (a new or empty folder;
    default a temporary one, removed afterwards); ``tolerance``: allowed where code or numerics differ."""

    cell: str = ""
    output: str | None = None
    tolerance: NonNegativeFloat = DEFAULT_TOLERANCE
    # a JSON file of re-runs to add this one to (its cell's earlier entry replaced), for the manuals
    record: str | None = None


def rerun_main(argv: Sequence[str]) -> Comparison:
    """Re-run a finished sweep cell from the argument list its ``cell.json`` recorded, into a fresh
    folder, and compare every number of the two ``results.json`` (test metrics, last validation,
    learned gammas): exactly when both runs did the same arithmetic, else within ``--tolerance``.
    Prints the differences and exits 1 on any.

    Examples:
        clipmag-rerun-cell runs/demo/code-search/default/cosine/seed0
        clipmag-rerun-cell runs/demo/code-search/default/qnorm/seed0 --output runs/rerun/qnorm --tolerance 1e-3
        clipmag-rerun-cell runs/demo/code-search/default/dnorm/seed0 --record results/reruns/demo.json"""
    cmd = parse_cli(RerunCommand, argv, field_flags(RerunCommand), description=rerun_main.__doc__, positional="cell")
    if not cmd.cell:
        raise ConfigError("command line: give the cell's folder (clipmag-rerun-cell CELL_DIR)")
    setup_logging()
    comparison = rerun_cell(cmd.cell, cmd.output, cmd.tolerance)
    print(format_comparison(comparison), flush=True)
    if cmd.record:
        record_comparison(cmd.record, comparison)
    if comparison.differences:
        raise SystemExit(1)
    return comparison


def rerun_entry() -> None:
    """Console script ``clipmag-rerun-cell``."""
    run_entry_point(rerun_main)
