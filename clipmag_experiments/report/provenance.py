"""Which code made a report's numbers, and the refusal to mix code states in one table.

Every cell's ``results.json`` names the commit it ran at and whether the tree was dirty
(:mod:`clipmag.results.provenance`). A table whose cells come from different commits, from a dirty tree or
from code that recorded nothing cannot be traced to one version of the code, so the report refuses
it unless asked (``allow_mixed``); then every table says which code states it mixes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from clipmag.errors import ConfigError
from clipmag.results.provenance import describe_code
from clipmag_experiments.report.collect import CellResult, runs_count

__all__ = ["MixedCode", "code_label", "check_one_code_state", "code_line"]


class MixedCode(ConfigError):
    """The report's cells do not all come from one clean commit."""


def code_label(cell: CellResult) -> str:
    """The code state a cell's results name (:func:`clipmag.results.provenance.describe_code`)."""
    return describe_code((cell.results.get("provenance") or {}).get("code"))


def _clean(label: str) -> bool:
    return label.startswith("commit ") and "dirty" not in label


def _by_label(cells: Iterable[CellResult]) -> dict[str, list[CellResult]]:
    groups: dict[str, list[CellResult]] = defaultdict(list)
    for c in cells:
        groups[code_label(c)].append(c)
    return dict(groups)


def _cell_name(cell: CellResult) -> str:
    c = cell.cell
    return f"{c.get('group')}/{c.get('model') or 'default'}/{cell.config}/seed{c.get('seed')}"


def _describe(groups: dict[str, list[CellResult]]) -> str:
    """Each code state with its count; every state but the most common one also names its cells."""
    if len(groups) == 1:
        label, members = next(iter(groups.items()))
        return f"{label} ({runs_count(len(members))}, every cell)"
    common = max(groups, key=lambda label: len(groups[label]))
    return "; ".join(
        f"{label} ({runs_count(len(members))})"
        if label == common
        else f"{label} ({runs_count(len(members))}: {', '.join(_cell_name(c) for c in members)})"
        for label, members in groups.items()
    )


def check_one_code_state(cells: Sequence[CellResult], allow_mixed: bool, started: Iterable[str] = ()) -> None:
    """Raise :class:`MixedCode` unless every cell ran at one clean commit (or ``allow_mixed``). Several
    clean commits pass when each is a start the sweep's ``sweep.json`` recorded (``started``: a protocol
    amended mid-sweep runs its last cells at the amendment's commit; each table names both)."""
    groups = _by_label(cells)
    if allow_mixed or (len(groups) == 1 and _clean(next(iter(groups)))):
        return
    recorded = {describe_code({"commit": commit, "dirty": False}) for commit in started}
    if all(_clean(label) and label in recorded for label in groups):
        return
    raise MixedCode(
        f"the cells do not come from one clean commit: {_describe(groups)}; rerun them at one commit, "
        "or pass --allow-mixed to build the report anyway (each table then names the code states it mixes)"
    )


def code_line(cells: Iterable[CellResult]) -> str:
    """One line naming the code behind ``cells``: the commit, or every state they mix and its cells."""
    groups = _by_label(cells)
    if len(groups) == 1:
        label, members = next(iter(groups.items()))
        return f"Code: {label} ({runs_count(len(members))})."
    return f"Code: **mixed** - {_describe(groups)}."
