"""The report's section for the comparison the sweep's protocol fixed before any result.

``sweep.json`` records which groups hold the compared systems (each head at its one setting, fixed
or chosen on dev) and how they are compared (:mod:`clipmag_experiments.design.comparison`); this section
lists, for exactly those groups, each head against cosine of the same group, start and test set:
the mark of the query-level test (Holm over the row's heads), the difference with its 95% interval
and the MDE. Nothing here compares across groups, so no setting is picked on test scores.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from clipmag.results.marks import difference_text, mark
from clipmag.results.significance import with_family_holm
from clipmag_experiments.design.protocol import read_protocol
from clipmag_experiments.report.starts import StartRow

__all__ = ["comparison_section", "protocol_comparison"]


def protocol_comparison(runs_dir: Path) -> dict[str, Any] | None:
    """The comparison the sweep's latest start recorded, or None (no sweep.json, or one from before
    protocols stated it)."""
    starts = read_protocol(runs_dir)
    return starts[-1].get("comparison") if starts else None


def _row_line(row: StartRow) -> str:
    parts = []
    for name, head in row.heads.items():
        if head.comparison is not None:
            sign = mark(head.comparison) or "no difference found"
            parts.append(f"{name} {sign} ({difference_text(head.comparison)})")
    return f"- `{row.group}` / `{row.start}` on {row.dataset}: " + "; ".join(parts) + "."


def _holm_over_table(rows: list[StartRow]) -> list[StartRow]:
    """The rows with every comparison's corrected p taken over all of them (the protocol's whole-table
    family, :func:`with_family_holm`): the marks then rest on the family the protocol names."""
    compared = [(r, name) for r in rows for name, head in r.heads.items() if head.comparison is not None]
    corrected = iter(with_family_holm([r.heads[name].comparison for r, name in compared]))  # type: ignore[misc]
    out = []
    for row in rows:
        heads = {}
        for name, head in row.heads.items():
            if head.comparison is not None:
                family = next(corrected)
                head = dataclasses.replace(head, comparison=dataclasses.replace(family, p_holm=family.p_family))
            heads[name] = head
        out.append(dataclasses.replace(row, heads=heads))
    return out


def comparison_section(runs_dir: Path, rows: list[StartRow]) -> list[str]:
    """Markdown lines: the protocol's statement, then its comparisons row by row."""
    statement = protocol_comparison(runs_dir)
    if not statement or not statement.get("groups"):
        return [
            "_The sweep's protocol declares no comparison (`comparison.groups` in its config): each group's heads "
            "are compared with cosine of the same group above, and no comparison across groups was tested._",
            "",
        ]
    groups = statement["groups"]
    lines = [
        f"Fixed in `sweep.json` before the first result: against {statement['baseline']}, {statement['test']}; "
        f"the family is {statement['family']}; {statement['power']}. Compared groups:",
        "",
        *[f"- `{name}`: {selection}" for name, selection in groups.items()],
        "",
    ]
    compared = [r for r in rows if r.group in groups]
    if statement.get("holm") == "table":
        compared = _holm_over_table(compared)
    missing = sorted(set(groups) - {r.group for r in compared})
    lines += [_row_line(r) for r in compared]
    if missing:
        lines.append(f"- Not (yet) finished: {', '.join(f'`{g}`' for g in missing)}.")
    return [*lines, ""]
