"""The stored sweep folders under a results root (``results/``), read once per process.

The manuals' renderers (:mod:`clipmag_experiments.manuals.sync`) ask for the same sweep many
times - a table, then the numbers in the prose around it - and its query-level tests take seconds,
so the cells, the starting-point rows and the code state of each sweep are computed on first use
and kept.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Hashable
from functools import cached_property
from pathlib import Path
from typing import Any

from clipmag.results.provenance import describe_code
from clipmag_experiments.design.protocol import PROTOCOL_FILE, read_protocol
from clipmag_experiments.report.collect import CellResult, find_cells, runs_count
from clipmag_experiments.report.numerics import check_one_numerics
from clipmag_experiments.report.starts import StartRow, start_rows

__all__ = ["StoredResults", "StoredSweep", "cited_code", "cpu_with_units", "runs_value", "time_value"]


def _once(cache: dict[Hashable, Any], key: Hashable, compute: Callable[[], Any]) -> Any:
    """``cache[key]``, computed on first use: the store's memo for derived figures and renderings."""
    if key not in cache:
        cache[key] = compute()
    return cache[key]


def cited_code(code: dict[str, Any] | None) -> str:
    """How the manuals cite a code state: ``commit `3a15e4e``` on a clean tree, else as
    :func:`describe_code` says it (with what made it dirty)."""
    if code and code.get("commit") and code.get("dirty") is False:
        return f"commit `{code['commit'][:7]}`"
    return describe_code(code)


def cpu_with_units(cpu: str, units: list[str]) -> str:
    """``AMD EPYC (no bf16 units)``, ``Intel Xeon (AVX512_BF16, AMX_BF16)``: a record's CPU with the
    bf16 units it found, since one model name spans CPU classes that compute differently."""
    return f"{cpu} ({', '.join(u.upper() for u in units) or 'no bf16 units'})"


class StoredSweep:
    """One stored sweep folder: its finished cells and what the report derives from them."""

    def __init__(self, folder: Path) -> None:
        if not folder.is_dir():
            raise FileNotFoundError(f"{folder}: no stored sweep here (the results root holds one folder per sweep)")
        self.folder = folder
        self._derived: dict[Hashable, Any] = {}

    def derived(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """``compute()``, once per ``key``: what a renderer derives from the cells (tests take seconds)."""
        return _once(self._derived, key, compute)

    @cached_property
    def cells(self) -> list[CellResult]:
        cells = find_cells(self.folder)
        if not cells:
            raise FileNotFoundError(f"{self.folder}: no finished cells (cell.json with results.json)")
        check_one_numerics(cells)  # the manuals compare a start's runs: they computed alike
        return cells

    @cached_property
    def start_rows(self) -> list[StartRow]:
        return start_rows(self.cells)

    def group(self, name: str) -> list[CellResult]:
        """The cells of one group (an error names the group when it has none)."""
        cells = [c for c in self.cells if c.cell["group"] == name]
        if not cells:
            raise ValueError(f"{self.folder}: no finished cells in group {name!r}")
        return cells

    def code(self) -> str:
        """The code behind the runs: ``commit `3a15e4e``` when one state ran them all. A sweep whose
        protocol was amended after some cells ran (its yaml says how) runs the rest at the
        amendment's commit; then every state is cited with its runs, most first, and each must be a
        clean commit recorded as a start in the sweep's ``sweep.json``, so no state enters the
        manuals that the protocol record does not show."""
        states = Counter(
            json.dumps((c.results.get("provenance") or {}).get("code"), sort_keys=True) for c in self.trained
        )
        codes = [(json.loads(state), runs) for state, runs in states.most_common()]
        if len(codes) == 1:
            return cited_code(codes[0][0])
        started = {(start.get("code") or {}).get("commit") for start in read_protocol(self.folder)}
        for code, runs in codes:
            if not (code and code.get("dirty") is False and code.get("commit") in started):
                raise ValueError(
                    f"{self.folder}: cells from {len(codes)} code states, and {describe_code(code)} "
                    f"({runs_count(runs)}) is not a clean commit recorded as a start in its {PROTOCOL_FILE}; "
                    "the manuals cite several states only where the protocol record shows each"
                )
        return " and ".join(f"{cited_code(code)} ({runs_count(runs)})" for code, runs in codes)

    def compared(self) -> list[CellResult]:
        """The cells of the groups the protocol compares (``comparison.groups`` of the first start in
        ``sweep.json``), without the selection groups that only chose their settings; every cell when
        the protocol names none."""
        starts = read_protocol(self.folder)
        groups = ((starts[0].get("config") or {}).get("comparison") or {}).get("groups") if starts else None
        return [c for c in self.cells if c.cell["group"] in groups] if groups else self.cells

    @property
    def trained(self) -> list[CellResult]:
        """The cells that trained (not a :attr:`~CellResult.shared_run`)."""
        return [c for c in self.cells if not c.shared_run]

    def cell_seconds(self) -> float:
        """The runs' training and testing time together, by their own timings (a continued cell
        counts only what it added, a shared run once): what the sweep cost, without prepare steps
        and waits."""
        timings = [c.results["timings"] for c in self.trained]
        return float(sum(t["train_seconds"] + t["test_seconds"] for t in timings))

    def runs_at(self) -> str:
        """``246 runs at commit `3a15e4e```: how many runs the manuals' figures rest on (a shared
        run once), and their code."""
        return f"{len(self.trained)} runs at {self.code()}"


class StoredResults:
    """A results root: ``stored.sweep("positive_regime")`` is ``<root>/positive_regime``, read once."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self._sweeps: dict[str, StoredSweep] = {}
        self._renderings: dict[Hashable, str] = {}

    def rendering(self, key: Hashable, render: Callable[[], str]) -> str:
        """``render()``, once per ``key``: a manual's table or value, which the check, the rendering
        and every manual that repeats it would otherwise recompute from the same files."""
        return _once(self._renderings, key, render)

    def sweep(self, name: str) -> StoredSweep:
        if name not in self._sweeps:
            self._sweeps[name] = StoredSweep(self.root / name)
        return self._sweeps[name]


DocsValue = Callable[[StoredResults, str], str]


def runs_value(sweep: str) -> DocsValue:
    """The manuals' value for how many runs the stored ``sweep`` holds and the code that made them
    (``124 runs at commit `3a15e4e```), the same sentence for every sweep."""

    def runs(stored: StoredResults, argument: str = "") -> str:
        return stored.sweep(sweep).runs_at()

    return runs


def time_value(sweep: str, unit: str = "hours") -> DocsValue:
    """The manuals' value for what the stored ``sweep`` cost: its runs' training and testing time
    together (:meth:`StoredSweep.cell_seconds`), in ``hours`` (one decimal) or ``minutes``."""
    seconds_per = {"hours": 3600, "minutes": 60}
    if unit not in seconds_per:
        raise ValueError(f"time_value: unit {unit!r} is not one of {', '.join(seconds_per)}")

    def cost(stored: StoredResults, argument: str = "") -> str:
        cells = stored.sweep(sweep)
        amount = cells.cell_seconds() / seconds_per[unit]
        text = f"{amount:.1f} hours" if unit == "hours" else f"{amount:.0f} minutes"
        partial = any(c.results["timings"].get("train_seconds_partial") for c in cells.trained)
        return f"at least {text}" if partial else text  # a run resumed from an untimed checkpoint

    return cost
