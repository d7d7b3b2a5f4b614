"""Re-run one finished sweep cell from its record and compare its numbers with the stored ones.

``clipmag-rerun-cell CELL_DIR [--output DIR] [--tolerance X]``: a stored result is only evidence if
running the recorded command again gives it back. The cell's ``cell.json`` holds the exact argument
list it trained with (a chosen variant included), and its results the settings it took from
elsewhere (``train.fast_dropout=false`` for a run from before the key); the re-run trains it into a
fresh folder (never the stored cell; under torchrun when the cell ran on several processes) and compares every number
of the two ``results.json``: the test metrics, the last validation and the head record (learned
gammas). Evaluations attached to the cell are not re-run. Prints the differences; exits 1 on any.

When the two runs did the same arithmetic - the same commit and difference from it, the same
``numerics`` (threads, CPU kernel level, autocast, device) and world size - every number must be
equal. Otherwise reduction order and kernels differ and the last bits may grow into a metric's
decimals, so a number matches within ``tolerance x max(1, |stored|)`` (absolute for scores in
[0, 1], relative for norms), and only the summary numbers are compared: one swapped rank moves a
query's own score by up to 1 but the mean by 1/queries, so per-query scores and per-document norms
are compared in the exact case only. Durations are never compared.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
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
from clipmag.train.predating import recorded_overrides
from clipmag_experiments.design.grid import CELL_FILE, Cell
from clipmag_experiments.sweep.rerun_record import record_comparison
from clipmag_experiments.sweep.run import run_cell

__all__ = [
    "DEFAULT_TOLERANCE",
    "Comparison",
    "RerunCommand",
    "compare_results",
    "format_comparison",
    "numbers",
    "rerun_cell",
    "rerun_main",
]

# Measured per machine (docs/experiments.md, "How much the demo varies"): text scores move by a few
# tenths of a point x100 between CPU classes, the 400-step CLIP R@1 by up to 2 points.
DEFAULT_TOLERANCE = 0.02
DURATIONS = frozenset({"timings", "calibration"})  # measured seconds, not results
DETAIL = "per_query"  # per-item scores: compared only when the arithmetic is the same
SHOWN = 30  # difference rows printed; the count says how many more


@dataclass
class Difference:
    name: str
    stored: float | None  # None: the number is missing on that side
    rerun: float | None


@dataclass
class Comparison:
    """The outcome: ``exact`` or within ``tolerance`` (``reasons`` say why not exact)."""

    cell: Path
    exact: bool
    reasons: list[str]
    tolerance: float
    compared: int
    differences: list[Difference] = field(default_factory=list)
    largest: float = 0.0  # the largest |rerun - stored| of the numbers compared on both sides
    codes: tuple[str, str] = ("", "")  # the code of the stored run and of the re-run, described


def numbers(tree: Any, prefix: str = "") -> dict[str, float]:
    """Every number in ``tree`` by its path (``metrics/stdlib/NDCG@10``, ``.../norms[3]``), durations
    left out; strings and booleans are settings, not results."""
    if isinstance(tree, bool) or not isinstance(tree, (int, float, Mapping, list)):
        return {}
    if isinstance(tree, (int, float)):
        return {prefix: float(tree)}
    if isinstance(tree, Mapping):
        items = [(f"{prefix}/{k}" if prefix else str(k), v) for k, v in tree.items() if k not in DURATIONS]
    else:
        items = [(f"{prefix}[{i}]", v) for i, v in enumerate(tree)]
    found: dict[str, float] = {}
    for path, value in items:
        found.update(numbers(value, path))
    return found


def _is_detail(path: str) -> bool:
    return f"/{DETAIL}/" in path or "[" in path


def _compared(record: Mapping[str, Any]) -> dict[str, float]:
    return numbers({key: record.get(key) or {} for key in ("metrics", "validation", "head")})


def _arithmetic_differences(stored: Mapping[str, Any], rerun: Mapping[str, Any]) -> list[str]:
    """Why the two runs may not have computed bit for bit alike (empty: they did the same arithmetic)."""
    reasons = []
    before, now = stored.get("numerics") or {}, rerun.get("numerics") or {}
    reasons += [
        f"{key} {before.get(key)} -> {now.get(key)}"
        for key in sorted({*before, *now})
        if before.get(key) != now.get(key)
    ]
    sizes = [(r.get("run") or {}).get("world_size", 1) for r in (stored, rerun)]
    if sizes[0] != sizes[1]:
        reasons.append(f"world size {sizes[0]} -> {sizes[1]}")
    codes = [(r.get("provenance") or {}).get("code") for r in (stored, rerun)]
    if not same_code(*codes):
        reasons.append(f"code {describe_code(codes[0])} -> {describe_code(codes[1])}")
    return reasons


def _equal(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def compare_results(
    stored: Mapping[str, Any], rerun: Mapping[str, Any], tolerance: float, cell: Path = Path(".")
) -> Comparison:
    """Compare two results records of one cell (the module docstring says how)."""
    reasons = _arithmetic_differences(stored, rerun)
    exact = not reasons
    old, new = _compared(stored), _compared(rerun)
    names = [n for n in dict.fromkeys([*old, *new]) if exact or not _is_detail(n)]
    differences, largest = [], 0.0
    for name in names:
        a, b = old.get(name), new.get(name)
        if a is None or b is None:
            differences.append(Difference(name, a, b))
            continue
        if not _equal(a, b):
            largest = max(largest, abs(b - a)) if math.isfinite(b - a) else largest
            if exact or not abs(b - a) <= tolerance * max(1.0, abs(a)):
                differences.append(Difference(name, a, b))
    codes = tuple(describe_code((r.get("provenance") or {}).get("code")) for r in (stored, rerun))
    return Comparison(cell, exact, reasons, tolerance, len(names), differences, largest, codes)


def format_comparison(comparison: Comparison) -> str:
    """A summary line, and a table of the numbers that differ."""
    how = "exact (same commit, numerics and world size)"
    if not comparison.exact:
        reasons = "; ".join(comparison.reasons)
        how = f"within {comparison.tolerance:g} x max(1, |stored|), summary numbers only ({reasons})"
    n = len(comparison.differences)
    lines = [f"rerun of {comparison.cell}: {comparison.compared} numbers compared, {how}: {n} differ"]
    if n:
        lines += ["", "| number | stored | rerun | difference |", "|---|---|---|---|"]
        for d in comparison.differences[:SHOWN]:
            gap = f"{d.rerun - d.stored:+.6g}" if d.stored is not None and d.rerun is not None else "missing"
            lines.append(f"| {d.name} | {_show(d.stored)} | {_show(d.rerun)} | {gap} |")
        lines += [f"... and {n - SHOWN} more"] if n > SHOWN else []
    return "\n".join(lines)


def _show(value: float | None) -> str:
    return "-" if value is None else f"{value:.6g}"


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
