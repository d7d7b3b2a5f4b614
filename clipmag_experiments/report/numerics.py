"""How a report's runs computed, and the refusal to compare runs that computed differently.

Every cell's ``results.json`` names its numerics (:func:`clipmag.results.record.numerics`): the
threads, the autocast precision, the CPU and its kernels. The report prints them beside the tables
(:func:`numerics_line`), so a figure's machine is read, not recalled; and a start whose runs differ
in threads or precision (:mod:`clipmag_experiments.cells.numerics`: a sweep resumed on
another class of CPU by a sweep without its guard) is refused unless asked (``allow_mixed``), as
mixed code states are, since its step-0 row, tuning runs and compared runs are read against one
another.
"""

from __future__ import annotations

from collections.abc import Sequence

from clipmag.errors import ConfigError
from clipmag_experiments.cells.numerics import mixed_numerics, numerics_key, table_of
from clipmag_experiments.report.collect import CellResult, runs_count

__all__ = ["MixedNumerics", "check_one_numerics", "numerics_line"]


class MixedNumerics(ConfigError):
    """A start's cells did not all compute alike (threads, precision)."""


def check_one_numerics(cells: Sequence[CellResult], allow_mixed: bool = False) -> None:
    """Raise :class:`MixedNumerics` when one start's cells (one group's, where a cell names no
    model) recorded different numerics, unless ``allow_mixed``. Records that name none (older code)
    are not counted."""
    runs = [
        (table_of(c.cell.get("model"), str(c.cell.get("group"))), str(c.directory), numerics_key(c.results["numerics"]))
        for c in cells
        if c.results.get("numerics")
    ]
    mixed = mixed_numerics(runs)
    if mixed and not allow_mixed:
        raise MixedNumerics(
            f"{mixed}; rerun its cells on one machine class, or pass --allow-mixed to build the report anyway "
            "(its numerics line then names each setting and its runs)"
        )


def numerics_line(cells: list[CellResult]) -> str:
    """How the runs computed: precision, CPU kernel level and threads, with how many runs used each (a
    shared run counted once). The last digits of every figure depend on these (another CPU class gives
    other digits)."""
    counts: dict[str, int] = {}
    for c in cells:
        if c.shared_run:
            continue
        n = c.results.get("numerics") or {}
        cpu = ", ".join(filter(None, [n.get("cpu"), *(u.upper() for u in n.get("cpu_bf16") or [])]))
        key = (
            f"{n.get('device', '?')}{f' ({cpu})' if cpu else ''}, autocast {n.get('autocast') or 'none (fp32)'}, "
            f"kernels {n.get('cpu_capability', '?')}, {n.get('torch_threads', '?')} threads"
        )
        counts[key] = counts.get(key, 0) + 1
    return "Numerics: " + "; ".join(f"{key} ({runs_count(n)})" for key, n in counts.items()) + "."
