"""How a re-run cell (:mod:`clipmag_experiments.sweep.rerun`) compares with its stored numbers, and
the file of re-runs that keeps those comparisons.

When the two runs did the same arithmetic - the same commit and difference from it, the same
``numerics`` (threads, CPU and its bf16 units, kernel level, autocast, device) and world size -
every number must be equal. Otherwise reduction order and kernels differ and the last bits may grow
into a metric's decimals, so a number matches within ``tolerance x max(1, |stored|)`` (absolute for scores in
[0, 1], relative for norms), and only the summary numbers are compared: one swapped rank moves a
query's own score by up to 1 but the mean by 1/queries, so per-query scores and per-document norms
are compared in the exact case only. Durations are never compared.

A stored result says which commit made it; whether today's code still makes it is a separate,
measured fact. Each ``--record`` adds one entry per cell to a JSON file (an earlier entry of the
same cell is replaced): the two code states, the CPU, whether the comparison was exact, how many
numbers it compared, how many differ and the largest difference, and the first differing numbers.
The manuals render their table of re-runs from such files (``results/reruns/``), not by hand.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clipmag.results.provenance import describe_code, same_code
from clipmag.runtime.machine import cpu_name
from clipmag.storage.files import write_text_atomic

__all__ = ["Comparison", "compare_results", "format_comparison", "numbers", "read_records", "record_comparison"]

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


KEPT_DIFFERENCES = 10  # differing numbers a re-run file keeps per cell


def _entry(comparison: Comparison) -> dict[str, Any]:
    return {
        "cell": str(comparison.cell),
        "stored_code": comparison.codes[0],
        "rerun_code": comparison.codes[1],
        "cpu": cpu_name(),
        "exact": comparison.exact,
        "reasons": comparison.reasons,
        "tolerance": comparison.tolerance,
        "compared": comparison.compared,
        "differ": len(comparison.differences),
        "largest_difference": comparison.largest,
        "differences": [[d.name, d.stored, d.rerun] for d in comparison.differences[:KEPT_DIFFERENCES]],
    }


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """The entries of a re-run file, in the order they were first recorded."""
    return list(json.loads(Path(path).read_text(encoding="utf-8"))["reruns"])


def record_comparison(path: str | Path, comparison: Comparison) -> Path:
    """Add ``comparison`` to the re-run file at ``path`` (created if absent), replacing its cell's entry."""
    path = Path(path)
    entries = read_records(path) if path.is_file() else []
    entry = _entry(comparison)
    found = [i for i, e in enumerate(entries) if e["cell"] == entry["cell"]]
    if found:
        entries[found[0]] = entry
    else:
        entries.append(entry)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_text_atomic(path, json.dumps({"reruns": entries}, indent=1) + "\n")
