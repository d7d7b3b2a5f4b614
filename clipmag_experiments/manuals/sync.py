"""The manuals' results, rendered from the stored results instead of typed by hand.

A number copied into prose goes stale the day its sweep is re-run or withdrawn. So README.md and
docs/*.md mark every table of stored results as a block, rendered whole::

    <!-- results:positive-regime -->
    | start | test set | ... |
    <!-- /results:positive-regime -->

and every number in the prose as an inline value, ``<!-- value:hn-mean:scifact/cosine -->60.04<!-- /value -->``
(a value's name may carry an argument after a colon). Each name is a renderer of one sweep's or
topic's module of this room, which registers it in its ``BLOCKS`` or ``VALUES``; this module gathers
them and reads the stored sweep folders under the results root (``results/``,
:mod:`clipmag_experiments.report.stored`).

``clipmag-report docs`` re-renders every mark of the manuals in place; with ``--check`` it changes
nothing and exits 1 naming each mark whose text is not what the results give
(``tests/test_docs_drift.py`` runs the check on the tree).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from clipmag.config.command_line import field_flags, parse_cli
from clipmag.errors import ConfigError
from clipmag_experiments.manuals import (
    budget,
    clip,
    compression,
    demo,
    deploy,
    emoji_towers,
    fair_fight,
    findings,
    findings_figure,
    hard_negatives,
    ladder,
    plan,
    positive_regime,
    powered_fight,
    reruns,
    serving,
    speed,
)
from clipmag_experiments.report.stored import StoredResults

__all__ = [
    "BLOCKS",
    "VALUES",
    "DocsCommand",
    "Mark",
    "docs_main",
    "render_text",
    "rendered_block",
    "rendered_value",
    "stale_marks",
]

BLOCKS: dict[str, Callable[[StoredResults], str]] = {
    **positive_regime.BLOCKS,
    **hard_negatives.BLOCKS,
    **speed.BLOCKS,
    **budget.BLOCKS,
    **reruns.BLOCKS,
    **deploy.BLOCKS,
    **serving.BLOCKS,
    **clip.BLOCKS,
    **emoji_towers.BLOCKS,
    **demo.BLOCKS,
    **fair_fight.BLOCKS,
    **powered_fight.BLOCKS,
    **ladder.BLOCKS,
    **findings.BLOCKS,
    **findings_figure.BLOCKS,
    **plan.BLOCKS,
}
VALUES: dict[str, Callable[[StoredResults, str], str]] = {
    **positive_regime.VALUES,
    **hard_negatives.VALUES,
    **budget.VALUES,
    **clip.VALUES,
    **demo.VALUES,
    **fair_fight.VALUES,
    **powered_fight.VALUES,
    **ladder.VALUES,
    **emoji_towers.VALUES,
    **speed.VALUES,
    **deploy.VALUES,
    **serving.VALUES,
    **compression.VALUES,
    **plan.VALUES,
}

_NAME = r"[\w-]+"
_BLOCK = re.compile(rf"^<!-- results:(?P<name>{_NAME}) -->\n(?P<body>.*?)^<!-- /results:(?P=name) -->$", re.M | re.S)
_VALUE = re.compile(rf"<!-- value:(?P<name>{_NAME})(?::(?P<argument>[^ >]+))? -->(?P<body>[^\n]*?)<!-- /value -->")
_OPENING = re.compile(rf"<!-- (?:results|value):{_NAME}")


@dataclass(frozen=True)
class Mark:
    """One rendered place of a manual: where it is, what it says and what the results say."""

    source: str  # file:line
    name: str
    written: str
    rendered: str


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def rendered_block(name: str, stored: StoredResults) -> str:
    """A block's table as ``stored`` gives it, computed once per results root."""
    return stored.rendering(("results", name), lambda: BLOCKS[name](stored))


def rendered_value(name: str, argument: str, stored: StoredResults) -> str:
    """An inline value as ``stored`` gives it, computed once per results root."""
    return stored.rendering(("value", name, argument), lambda: VALUES[name](stored, argument))


def _render(kind: str, name: str, argument: str | None, stored: StoredResults, where: str) -> str:
    known = BLOCKS if kind == "results" else VALUES
    if name not in known:
        raise ConfigError(f"{where}: no {kind} renderer named {name!r}; known: {', '.join(sorted(known))}")
    try:
        if kind == "results":
            return rendered_block(name, stored) + "\n"
        return rendered_value(name, argument or "", stored)
    except (KeyError, ValueError, FileNotFoundError, StopIteration) as err:
        raise ConfigError(
            f"{where}: {kind}:{name}{':' + argument if argument else ''} cannot be rendered from "
            f"{stored.root}: {type(err).__name__}: {err}"
        ) from None


def marks(text: str, source: str, stored: StoredResults) -> list[Mark]:
    """Every block and value of ``text`` with its rendering; an opening mark without its closing
    one, or an unknown name, is an error naming the file and line."""
    found: list[Mark] = []
    spans = []
    for match in _BLOCK.finditer(text):
        where = f"{source}:{_line(text, match.start())}"
        spans.append(match.start())
        found.append(Mark(where, match["name"], match["body"], _render("results", match["name"], None, stored, where)))
    for match in _VALUE.finditer(text):
        where = f"{source}:{_line(text, match.start())}"
        spans.append(match.start())
        label = match["name"] + (f":{match['argument']}" if match["argument"] else "")
        found.append(
            Mark(where, label, match["body"], _render("value", match["name"], match["argument"], stored, where))
        )
    for match in _OPENING.finditer(text):
        if match.start() not in spans:
            raise ConfigError(
                f"{source}:{_line(text, match.start())}: {match[0]} --> has no closing mark "
                "(<!-- /results:NAME --> on its own line after a block, <!-- /value --> on the same line after a value)"
            )
    return found


def render_text(text: str, source: str, stored: StoredResults) -> str:
    """``text`` with every block and value re-rendered from ``stored``."""
    marks(text, source, stored)  # errors first, naming the place
    text = _BLOCK.sub(
        lambda m: f"<!-- results:{m['name']} -->\n{rendered_block(m['name'], stored)}\n<!-- /results:{m['name']} -->",
        text,
    )
    return _VALUE.sub(
        lambda m: (
            m[0][: m.start("body") - m.start()]
            + rendered_value(m["name"], m["argument"] or "", stored)
            + "<!-- /value -->"
        ),
        text,
    )


def stale_marks(files: Sequence[Path], stored: StoredResults) -> list[Mark]:
    """The marks of ``files`` whose text differs from what the results give."""
    return [
        m
        for path in files
        for m in marks(path.read_text(encoding="utf-8"), str(path), stored)
        if m.written != m.rendered
    ]


@dataclass
class DocsCommand:
    """``files``: the manuals (default README.md and docs/*.md of this folder); ``results``: the results
    root holding the stored sweeps; ``check``: change nothing, exit 1 when a mark is stale."""

    files: list[str] = field(default_factory=list)
    results: str = "results"
    check: bool = False


def _default_files() -> list[Path]:
    return [p for p in [Path("README.md"), *sorted(Path("docs").glob("*.md"))] if p.is_file()]


def docs_main(argv: Sequence[str]) -> int:
    """Render the manuals' results blocks and values from the stored results, in place.

    clipmag-report docs [--files README.md docs/experiments.md] [--results results] [--check]"""
    cmd = parse_cli(DocsCommand, argv, field_flags(DocsCommand), description=docs_main.__doc__)
    files = [Path(f) for f in cmd.files] or _default_files()
    for path in files:
        if not path.is_file():
            raise ConfigError(f"--files: {path} is not a file")
    stored = StoredResults(cmd.results)
    shown = [name for name in findings_figure.FIGURES if any(_shows(path, name) for path in files)]
    if cmd.check:
        stale = stale_marks(files, stored)
        for m in stale:
            print(f"{m.source}: {m.name} is stale: the results give {m.rendered.strip()[:200]!r}")
        figures = [why for name in shown if (why := findings_figure.FIGURES[name][1](stored, Path(".")))]
        for why in figures:
            print(why)
        print(
            f"{len(stale)} stale marks and {len(figures)} stale figures in {len(files)} files"
            if stale or figures
            else f"every mark of {len(files)} files matches {cmd.results}"
        )
        return 1 if stale or figures else 0
    for path in files:
        text = path.read_text(encoding="utf-8")
        rendered = render_text(text, str(path), stored)
        if rendered != text:
            path.write_text(rendered, encoding="utf-8")
            print(f"{path}: rendered")
    for name in shown:
        draw, stale_because = findings_figure.FIGURES[name]
        if stale_because(stored, Path(".")):
            print(f"{draw(stored, Path('.'))}: drawn")
    return 0


def _shows(path: Path, block: str) -> bool:
    """Whether the manual at ``path`` holds the block ``block`` (a figure's link)."""
    return f"<!-- results:{block} -->" in path.read_text(encoding="utf-8")
