"""Re-run one finished sweep cell from its record and compare its numbers with the stored ones.

``clipmag-rerun-cell CELL_DIR [--output DIR] [--tolerance X]`` runs the argument list its
``cell.json`` recorded (the variant a choice picked included) into a fresh folder - never the
stored cell's - then compares every metric of every test set. On the same code (commit, clean
tree) and numerics (threads, CPU kernel level, autocast, device) a CPU run is deterministic, so the
numbers must be equal; otherwise they must agree within ``tolerance`` (absolute, default 0.01: a
30-step fine-tune's nDCG@10 moves by a few tenths of a point between CPU kernel levels, so a
point separates that from a different result). Prints each difference; exits 1 on a mismatch.
Evaluations attached to the cell are not re-run.
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from clipmag.command_line import field_flags, parse_cli
from clipmag.config import ConfigError
from clipmag.config_types import Range
from clipmag.entry import run_entry_point
from clipmag.experiments.grid import CELL_FILE
from clipmag.frontends import get_front_end
from clipmag.provenance import code_state
from clipmag.results import RESULTS_FILE, read_results
from clipmag.run_logging import logger

__all__ = ["RerunCommand", "compare_metrics", "rerun_main"]

NUMERICS = ("torch_threads", "cpu_capability", "autocast", "device")


@dataclass
class RerunCommand:
    """``cell``: a finished cell's folder; ``output``: where the re-run goes (default: a new temporary
    folder); ``tolerance``: the absolute difference allowed when code or numerics differ."""

    cell: str = ""
    output: str | None = None
    tolerance: Annotated[float, Range(0.0)] = 0.01


def _flat_metrics(record: dict[str, Any]) -> dict[tuple[str, str], float]:
    return {
        (dataset, name): float(value)
        for dataset, values in record["metrics"].items()
        for name, value in values.items()
        if isinstance(value, (int, float)) and not isinstance(value, bool)
    }


def compare_metrics(stored: dict[str, Any], rerun: dict[str, Any], tolerance: float) -> list[tuple]:
    """(dataset, metric, stored, rerun, |difference|, within) for every metric either record has."""
    old, new = _flat_metrics(stored), _flat_metrics(rerun)
    rows = []
    for key in sorted(old.keys() | new.keys()):
        a, b = old.get(key, math.nan), new.get(key, math.nan)
        difference = abs(a - b) if not (math.isnan(a) and math.isnan(b)) else 0.0
        rows.append((*key, a, b, difference, difference <= tolerance))
    return rows


def _conditions_differ(stored: dict[str, Any], rerun: dict[str, Any]) -> list[str]:
    """What differs between the stored run and the re-run that may change the last digits: the
    code (commit, a dirty tree) and the numerics each recorded."""
    differ = []
    code, here = (stored.get("provenance") or {}).get("code") or {}, code_state()
    if not code.get("commit") or code.get("commit") != here.get("commit"):
        differ.append(f"commit {code.get('commit')} there, {here.get('commit')} here")
    if code.get("dirty") or here.get("dirty"):
        differ.append("a dirty tree")
    before, now = stored.get("numerics") or {}, rerun.get("numerics") or {}
    differ += [f"{k} {before.get(k)} there, {now.get(k)} here" for k in NUMERICS if before.get(k) != now.get(k)]
    return differ


def _rerun_argv(argv: list[str], output: Path) -> list[str]:
    if "--output" not in argv:
        raise ConfigError(f"the cell's argument list names no --output: {argv}")
    at = argv.index("--output")
    return [*argv[:at], "--output", str(output), *argv[at + 2 :]]


def rerun_main(argv: Sequence[str]) -> list[tuple]:
    """Re-run a finished cell and compare; exits 1 when a metric differs beyond what is allowed.

    clipmag-rerun-cell CELL_DIR [--output DIR] [--tolerance X]"""
    cmd = parse_cli(RerunCommand, argv, field_flags(RerunCommand), description=rerun_main.__doc__, positional="cell")
    cell = Path(cmd.cell)
    if not (cell / CELL_FILE).is_file() or not (cell / RESULTS_FILE).is_file():
        raise FileNotFoundError(f"{cell}: not a finished sweep cell (it needs {CELL_FILE} and {RESULTS_FILE})")
    description = json.loads((cell / CELL_FILE).read_text(encoding="utf-8"))
    stored = read_results(cell / RESULTS_FILE)
    output = Path(cmd.output) if cmd.output else Path(tempfile.mkdtemp(prefix="clipmag-rerun-"))
    if output.resolve() == cell.resolve():
        raise ConfigError(f"--output {output} is the stored cell itself; give another folder")
    get_front_end(description["kind"]).main(_rerun_argv(list(description["argv"]), output))
    rerun = read_results(output / RESULTS_FILE)
    differ = _conditions_differ(stored, rerun)
    exact = not differ
    if differ:
        logger.warning("%s: re-run under other conditions (%s): allowing %g", cell, "; ".join(differ), cmd.tolerance)
    rows = compare_metrics(stored, rerun, 0.0 if exact else cmd.tolerance)
    print(f"{'test set':<24} {'metric':<20} {'stored':>10} {'re-run':>10} {'|diff|':>9}")
    for dataset, metric, a, b, difference, within in rows:
        print(f"{dataset:<24} {metric:<20} {a:>10.6g} {b:>10.6g} {difference:>9.2g}{'' if within else '  MISMATCH'}")
    allowed = "exactly" if exact else f"within {cmd.tolerance:g}"
    failures = sum(not r[-1] for r in rows)
    print(f"{len(rows) - failures} of {len(rows)} metrics agree {allowed}; re-run in {output}")
    if failures:
        raise SystemExit(1)
    return rows


def rerun_entry() -> None:
    """Console script ``clipmag-rerun-cell``."""
    run_entry_point(rerun_main)
