"""Whether runs that one table would compare computed alike: the same thread count and autocast
precision, the two a run's settings decide. The last bits of a float result shift with the thread
count (the order of a reduction), and bf16 rounding moves the digits of a short run's metric by far
more. Where a config says ``precision: auto`` the machine decides the precision - bf16 on AVX-512
BF16 or AMX, fp32 on AVX2 - so a sweep resumed on another class of CPU would put both into one table
without a word in its config. The CPU's own kernels (AVX2 or AVX-512, AMX tiles or not) also move
last bits, as running anywhere does; no setting chooses them, so they are recorded and printed
beside every table (:func:`clipmag_experiments.report.numerics.numerics_line`), not refused.

The table is a start's (its model: the step-0 row, the tuning runs that choose its settings and
the compared runs are read against one another), or the group's where a cell names no model.
Plain data in, a sentence out, so the sweep (before it runs cells,
:mod:`clipmag_experiments.sweep.numerics_check`) and the report (before it compares finished ones,
:mod:`clipmag_experiments.report.numerics`) ask the same question without importing torch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["mixed_numerics", "numerics_key", "table_of"]


def numerics_key(numerics: Mapping[str, Any]) -> str:
    """``2 threads, bfloat16``: what of a run's ``numerics`` record
    (:func:`clipmag.results.record.numerics`) one table holds fixed."""
    return f"{numerics.get('torch_threads', '?')} threads, {numerics.get('autocast') or 'fp32'}"


def table_of(model: str | None, group: str) -> str:
    """The table a cell's runs are compared in: its start's, else its group's."""
    return f"start {model!r}" if model else f"group {group!r}"


def mixed_numerics(runs: Iterable[tuple[str, str, str]]) -> str | None:
    """What mixes numerics within a table among ``runs`` (table, label, :func:`numerics_key`), or
    None: the refusal's text, for a sweep about to run cells and for a report of finished ones alike."""
    by_table: dict[str, dict[str, list[str]]] = {}
    for table, label, key in runs:
        by_table.setdefault(table, {}).setdefault(key, []).append(label)
    for table, keys in by_table.items():
        if len(keys) > 1:
            seen = "; ".join(f"{key}: {', '.join(labels[:2])}" for key, labels in sorted(keys.items()))
            return (
                f"{table} mixes numerics ({seen}); a result's last bits depend on the thread count and its "
                "digits on bf16 rounding, so one table holds one setting"
            )
    return None
