"""A stand-in preparation step for sweep tests: records its calls and writes the file it is given."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

CALLS: list[list[str]] = []


def main(argv: Sequence[str]) -> int:
    CALLS.append(list(argv))
    Path(argv[0]).parent.mkdir(parents=True, exist_ok=True)
    Path(argv[0]).write_text("prepared\n")
    return 0
