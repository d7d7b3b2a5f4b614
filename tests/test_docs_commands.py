"""Every command in a fenced shell block of README.md and docs/*.md names a script, module or make
target that exists, and every flag and dotted key it passes is one that script's --help lists."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import runpy
import shlex
import sys
from functools import cache
from pathlib import Path

import pytest
from docs_blocks import PAGES, REPO, shell_blocks

DOTTED = re.compile(r"^'?\"?([a-z_]+(?:\.[a-z_]+)+)=")
# A script whose plain --help is short (it answers before the program it wraps loads) and lists its
# every flag with these arguments instead: CLIP-benchmark's flags are its eval command's.
FULL_HELP = {"scripts/eval_clip_benchmark.py": ["eval", "--help"]}


def _argv(command: str) -> list[str]:
    words = shlex.split(command)
    if words and words[0] == "torchrun":  # drop the launcher and its options
        words = ["python", *[w for w in words[1:] if not w.startswith("--")]]
    return words


@cache
def help_text(target: str) -> str:
    """What ``python TARGET --help`` prints, run in this process (the libraries are imported once)."""
    out = io.StringIO()
    argv, path = sys.argv, list(sys.path)
    sys.argv = [target, *FULL_HELP.get(target, ["--help"])]
    if target.endswith(".py"):
        sys.path.insert(0, str((REPO / target).parent))  # as python does for a script (benchmarks' harness)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()), pytest.raises(SystemExit):
            if target.endswith(".py"):
                runpy.run_path(str(REPO / target), run_name="__main__")
            else:
                runpy.run_module(target, run_name="__main__", alter_sys=True)
    finally:
        sys.argv, sys.path[:] = argv, path
    return out.getvalue()


def _cases() -> list[tuple[str, str]]:
    return [
        (f"{block.page}:{number}", command)
        for block in shell_blocks()
        for number, command in block.commands
        if command.split()[0] in ("python", "torchrun", "make")
    ]


@pytest.mark.parametrize(("where", "command"), _cases(), ids=[w for w, _ in _cases()])
def test_documented_command_exists_with_its_flags(where, command):
    words = _argv(command)
    if words[0] == "make":
        targets = re.findall(r"^([\w-]+):", (REPO / "Makefile").read_text(), re.M)
        assert words[1] in targets, f"{where}: make target {words[1]!r} not in the Makefile"
        return
    if words[1] == "-c":
        return
    if words[1] == "-m":
        target, rest = words[2], words[3:]
        assert importlib.util.find_spec(target) is not None, f"{where}: module {target} not found"
        if rest and not rest[0].startswith("-") and "{" not in rest[0]:
            return  # a module with sub-commands: their flags are checked by its own tests
    else:
        target, rest = words[1], words[2:]
        assert (REPO / target).is_file(), f"{where}: {target} does not exist"
    listing = help_text(target)
    for word in rest:
        flag = word.split("=", 1)[0]
        if flag.startswith("--") and flag != "--help":
            assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", listing), f"{where}: {target} has no {flag}"
        dotted = DOTTED.match(word)
        if dotted and not word.startswith(("args=", "'args=")):
            assert dotted.group(1) in listing or target.endswith("sweep.py"), (
                f"{where}: {target} lists no key {dotted.group(1)}"
            )


def test_every_manual_is_linked_from_the_readme():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for page in (REPO / "docs").glob("*.md"):
        assert f"docs/{page.name}" in readme, f"README.md does not link docs/{page.name}"


def _anchors(page: Path) -> set[str]:
    """The anchors of a manual's headings, as GitHub makes them (lower case, punctuation dropped,
    spaces as hyphens); headings inside fenced blocks are not headings."""
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)
    headings = re.findall(r"^#{1,6} (.+)$", text, re.M)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}


def test_every_link_to_a_section_of_a_manual_finds_its_heading():
    for page in PAGES:
        for target, anchor in re.findall(r"\]\(([\w./-]*\.md)#([\w-]+)\)", page.read_text(encoding="utf-8")):
            linked = (page.parent / target).resolve()
            assert linked.is_file(), f"{page.name} links {target}, which does not exist"
            assert anchor in _anchors(linked), f"{page.name} links {target}#{anchor}, a section {target} lacks"
