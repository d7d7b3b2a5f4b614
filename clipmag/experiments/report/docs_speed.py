"""The manuals' speed tables (``results/speed``), rendered from the benchmarks' JSON records.

``benchmarks/profile_step.py`` writes where a training step's time goes, per operator kind;
``benchmarks/bench_train_text.py --output`` writes ours against the peer and, with ``--before``,
ours with a speed-up switched off, in one run. Each record names the CPU and the code state it was
measured at, and the tables print both, so a figure never loses the machine it belongs to.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from clipmag.experiments.report.stored import StoredResults
from clipmag.results.provenance import describe_code

__all__ = ["BLOCKS"]

FOLDER = "speed"
KINDS = (
    "gemm",
    "attention",
    "norm+act",
    "elementwise",
    "casts+copies",
    "optimizer+clip",
    "embedding grad",
    "autograd",
    "tokenise+data",
    "python+other",
)


def _record(stored: StoredResults, name: str) -> dict[str, Any]:
    path = Path(stored.root) / FOLDER / name
    return json.loads(path.read_text(encoding="utf-8"))


def _measured_on(record: dict[str, Any]) -> str:
    return f"Measured on {record['cpu']}, {record['threads']} threads, at {describe_code(record['code'])}."


def profile_table(stored: StoredResults) -> str:
    """Per configuration: the unprofiled step time, then each kind's share of the profiled step."""
    record = _record(stored, "profile_step.json")
    lines = [
        "| configuration | step (ms) | " + " | ".join(KINDS) + " |",
        "|---|---:|" + "---:|" * len(KINDS),
    ]
    for row in record["rows"]:
        total = row["profiled_step_ms"]
        shares = " | ".join(f"{row['kinds_ms'].get(k, 0.0) / total:.0%}" for k in KINDS)
        lines.append(f"| {row['config']} | {row['step_ms']:.0f} | {shares} |")
    return "\n".join(lines) + "\n\n" + _measured_on(record)


def _median_range(values: list[float], digits: int) -> str:
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def train_text_table(stored: StoredResults) -> str:
    """Samples per second of every side, then the ratios (medians of per-round ratios, with range)."""
    record = _record(stored, "train_text.json")
    settings = record["settings"]
    before = ", ".join(f"train.{k}={v}" for k, v in settings.get("before", {}).items()) or "none"
    lines = ["| side | samples/s, median (range) |", "|---|---:|"]
    lines += [f"| {side} | {_median_range(rates, 1)} |" for side, rates in record["samples_per_s"].items()]
    lines += ["", "| ratio | median (range) |", "|---|---:|"]
    lines += [f"| {name} | {_median_range(values, 2)} |" for name, values in record["ratios"].items()]
    lines += ["", "| our step | GFLOP/s | of a 2048² GEMM now |", "|---|---:|---:|"]
    lines += [
        f"| {side} | {rate['achieved_gflops']:.0f} | {rate['of_gemm']:.0%} |"
        for side, rate in record.get("flop_rates", {}).items()
    ]
    shape = (
        f"batch {settings['batch_size']}, max length {settings['max_length']}, {settings['steps']} timed steps after "
        f'{settings["warmup"]} warm-up, {settings["rounds"]} rotating rounds; "before": {before}'
    )
    return "\n".join(lines) + f"\n\n{shape}. " + _measured_on(record)


BLOCKS = {"speed-profile": profile_table, "speed-train-text": train_text_table}
