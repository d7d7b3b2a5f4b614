"""The shape the project keeps: no copy-paste twins (a module's length follows from its one
responsibility, so no line count is enforced: a file is never cut only to fit a number), every console
script quiet when its reader stops early (``--help | head``), the plugin group documented under its
real name, and research configs naming the data paths the download commands write."""

from __future__ import annotations

import collections
import importlib
import io
import os
import re
import subprocess
import sys
from importlib.metadata import distribution
from pathlib import Path

import pytest
from conftest import REPO, script_env

from clipmag.registry import plugins

LIBRARY = [
    p
    for root in ("clipmag", "clipmag_experiments", "text_retrieval", "image_text")
    for p in sorted((REPO / root).rglob("*.py"))
]
SCRIPTS = {e.name: e.value for e in distribution("clipmag").entry_points if e.group == "console_scripts"}
TWIN_LINES = 6  # consecutive lines of code (imports, comments and blank lines aside)


def _code_lines(path: Path) -> list[str]:
    lines = (line.strip() for line in path.read_text().splitlines())
    return [line for line in lines if line and not line.startswith(("import ", "from ", "#", '"""'))]


def test_no_two_library_files_share_a_block_of_code():
    where = collections.defaultdict(set)
    for path in LIBRARY:
        code = _code_lines(path)
        for i in range(len(code) - TWIN_LINES + 1):
            where[tuple(code[i : i + TWIN_LINES])].add(str(path.relative_to(REPO)))
    twins = {files for files in map(frozenset, where.values()) if len(files) > 1}
    assert not twins, f"copy-paste twins: {[sorted(t) for t in twins]}"


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_help_into_a_closed_pipe_ends_quietly(script, monkeypatch, capsys):
    """``SCRIPT --help | head``: the reader has gone before the help is flushed."""
    module, function = SCRIPTS[script].split(":")
    read, write = os.pipe()
    os.close(read)
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.FileIO(write, "w")))
    monkeypatch.setattr(sys, "argv", [script, "--help"])
    try:
        with pytest.raises(SystemExit) as stop:
            getattr(importlib.import_module(module), function)()
    finally:
        sys.stdout.close()
    assert stop.value.code == 141
    assert capsys.readouterr().err == ""


def test_a_real_pipe_closed_by_head_leaves_no_traceback():
    command = f"{sys.executable} scripts/train_text.py --help | head -n 1"
    proc = subprocess.run(command, shell=True, cwd=REPO, env=script_env(), capture_output=True, text=True, timeout=300)
    assert proc.stdout.startswith("Fine-tune a text encoder") and proc.stderr == "", proc.stderr[-2000:]


def test_the_plugin_docstring_names_the_entry_point_group_it_defines():
    named = re.findall(r"entry-point group\s+``([\w.]+)``", plugins.__doc__ or "")
    assert named == [plugins.PLUGIN_GROUP]
    assert f'[project.entry-points."{plugins.PLUGIN_GROUP}"]' in (REPO / "pyproject.toml").read_text()


def test_research_configs_name_the_paths_the_download_commands_write():
    configs = sorted(
        p
        for package in ("clipmag_experiments", "text_retrieval", "image_text")
        for p in (REPO / package / "configs").rglob("*.yaml")
    )
    assert len(configs) > 20
    elsewhere = [str(p.relative_to(REPO)) for p in configs if "shared/data" in p.read_text()]
    assert not elsewhere, f"configs reading a path users do not have: {elsewhere}"
    # BEIR sets where `python -m text_retrieval.data.download beir NAME data/beir` puts them
    beir = {m for p in configs for m in re.findall(r"[\w./-]*beir/\w+", p.read_text())}
    assert beir and all(path.startswith("data/beir/") for path in beir), beir
