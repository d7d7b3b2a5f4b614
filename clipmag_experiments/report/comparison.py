"""The report's section for the comparison the sweep's protocol fixed before any result.

``sweep.json`` records which groups hold the compared systems (each head at its one setting, fixed
or chosen on dev) and how they are compared (:mod:`clipmag_experiments.design.comparison`); this section
lists, for exactly those groups, each head against cosine of the same group, start and test set:
the mark of the query-level and seed-aware tests (Holm over the row's heads, or the whole table's
where the protocol says so), the difference with its 95% interval and the MDE at that level, and,
with the protocol's equivalence margin, what the comparison reads: above, below, equivalent within
the margin, or undecided. Where the protocol names a start group, each head's change from its
untuned start follows, tested alike in a family of its own. Nothing here compares across groups, so
no setting is picked on test scores.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from clipmag.results.marks import difference_text, family_verdict, mark
from clipmag.results.significance import Comparison, with_family_holm
from clipmag_experiments.design.protocol import read_protocol
from clipmag_experiments.report.starts import StartRow

__all__ = ["comparison_section", "holm_over_table", "protocol_comparison"]


def protocol_comparison(runs_dir: Path) -> dict[str, Any] | None:
    """The comparison the sweep's latest start recorded, or None (no sweep.json, or one from before
    protocols stated it)."""
    starts = read_protocol(runs_dir)
    return starts[-1].get("comparison") if starts else None


def _said(c: Comparison) -> str:
    """What one comparison reads: its verdict under the family with a margin, else its row mark."""
    if c.margin is not None:
        return family_verdict(c)
    return mark(c) or "no difference found"


def _row_line(row: StartRow, attribute: str = "comparison") -> str:
    parts = []
    for name, head in row.heads.items():
        if (c := getattr(head, attribute)) is not None:
            mde = f", MDE at this level {100 * c.detectable_family:.2f}" if c.detectable_family is not None else ""
            parts.append(f"{name} {_said(c)} ({difference_text(c)}{mde})")
    return f"- `{row.group}` / `{row.start}` on {row.dataset}: " + "; ".join(parts) + "."


def holm_over_table(rows: list[StartRow], margin: float | None, attribute: str = "comparison") -> list[StartRow]:
    """The rows with every comparison's corrected p taken over all of them (the protocol's whole-table
    family, :func:`with_family_holm`, with its equivalence margin): the marks then rest on the family
    the protocol names. ``attribute``: against cosine, or each head's change from its start."""
    compared = [(r, name) for r in rows for name, head in r.heads.items() if getattr(head, attribute) is not None]
    corrected = iter(with_family_holm([getattr(r.heads[name], attribute) for r, name in compared], margin))
    out = []
    for row in rows:
        heads = {}
        for name, head in row.heads.items():
            if getattr(head, attribute) is not None:
                family = next(corrected)
                replaced = dataclasses.replace(family, p_holm=family.p_family)
                head = dataclasses.replace(head, **{attribute: replaced})
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
    margin = statement.get("margin")
    if statement.get("equivalence"):
        lines += [f"Equivalence: {statement['equivalence']}.", ""]
    if statement.get("holm") == "table":
        compared = holm_over_table(compared, margin)
    missing = sorted(set(groups) - {r.group for r in compared})
    lines += [_row_line(r) for r in compared]
    if missing:
        lines.append(f"- Not (yet) finished: {', '.join(f'`{g}`' for g in missing)}.")
    if statement.get("start_group"):
        from_start = holm_over_table(compared, margin, "from_start")
        lines += ["", "Each head's change from its untuned start (the same tests, Holm over these):", ""]
        lines += [_row_line(r, "from_start") for r in from_start]
    return [*lines, ""]
