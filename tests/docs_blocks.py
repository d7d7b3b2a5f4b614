"""The fenced blocks of README.md and docs/*.md, as a reader copies them: shell blocks (```bash)
with their commands, and Python blocks.

A shell block can opt out of being run by the docs test with a marker comment on the line just
above its fence, which says why: ``<!-- not run by the docs test: the clone command needs your
repository's address -->``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SHELL = ("bash", "sh", "shell")
OPT_OUT = re.compile(r"^<!-- not run by the docs test: (.+\S) -->$")


@dataclass(frozen=True)
class Block:
    """One fenced block: its page (relative to the repository), the line of its opening fence, its
    language, its text as written, and the reason of an opt-out marker above it (None: none)."""

    page: str
    line: int
    language: str
    text: str
    opt_out: str | None

    @property
    def first_command(self) -> str:
        """The block's first command without its trailing comment: what names the block in the tests."""
        for row in self.text.splitlines():
            command = row.split("  #", 1)[0].rstrip(" \\").strip()
            if command and not command.startswith("#"):
                return command
        return ""

    @property
    def commands(self) -> list[tuple[int, str]]:
        """(line number, command) of every command: continuation lines joined, comments dropped."""
        found: list[tuple[int, str]] = []
        pending, start = "", 0
        for offset, row in enumerate(self.text.splitlines(), 1):
            text = "" if row.lstrip().startswith("#") else row.split("  #", 1)[0].rstrip()
            if not pending:
                start = self.line + offset
            pending += " " + text.rstrip("\\").strip()
            if not text.endswith("\\"):
                if pending.strip():
                    found.append((start, pending.strip()))
                pending = ""
        return found

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def fenced_blocks(path: Path) -> list[Block]:
    """Every fenced block of ``path`` (fences inside a list item may be indented)."""
    blocks: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    opened: tuple[int, str, str] | None = None  # (line, language, indent) of the open fence
    body: list[str] = []
    for number, line in enumerate(lines, 1):
        stripped = line.lstrip()
        if not stripped.startswith("```"):
            if opened is not None:
                body.append(line[len(opened[2]) :] if line.startswith(opened[2]) else line.lstrip())
            continue
        if opened is None:
            opened, body = (number, stripped[3:].strip(), line[: len(line) - len(stripped)]), []
            continue
        start, language, _ = opened
        marker = OPT_OUT.match(lines[start - 2].strip()) if start >= 2 else None
        page = str(path.relative_to(REPO))
        blocks.append(Block(page, start, language, "\n".join(body) + "\n", marker.group(1) if marker else None))
        opened = None
    return blocks


def shell_blocks() -> list[Block]:
    return [block for page in PAGES for block in fenced_blocks(page) if block.language in SHELL]


def python_blocks(page: Path) -> list[Block]:
    return [block for block in fenced_blocks(page) if block.language == "python"]
