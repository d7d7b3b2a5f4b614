"""Every console script answers ``--help`` without loading torch, transformers, open_clip or a vector
store: its command line, config dataclasses and defaults import none of them, and what runs a command
imports them when it runs. ``clipmag-eval-clip-benchmark``, whose other flags are CLIP-benchmark's,
answers ``--help`` alone before CLIP-benchmark loads, and says where those flags are listed.

Whether a library was imported is read from ``sys.modules`` in a fresh interpreter, which does not
depend on how loaded the machine is; the time is bounded loosely, as a guard against a start-up that
imports everything again (``benchmarks/bench_help.py`` prints the times)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from importlib.metadata import distribution

import pytest
from conftest import REPO, script_env

SCRIPTS = {e.name: e.value for e in distribution("clipmag").entry_points if e.group == "console_scripts"}
HEAVY = (
    "torch",
    "transformers",
    "open_clip",
    "clip_benchmark",
    "faiss",
    "lancedb",
    "sentence_transformers",
    "webdataset",
)
SECONDS = 5.0  # today well under 2 s alone; loose, since test machines are shared and vary
# Calls the entry point as its console script does, then prints which heavy libraries are loaded.
CHILD = """
import importlib, json, sys
module, function = sys.argv[1].split(":")
heavy = sys.argv[3:]
sys.argv = [sys.argv[2], "--help"]
try:
    getattr(importlib.import_module(module), function)()
except SystemExit as stop:
    code = stop.code
else:
    code = 0
print(json.dumps({"code": code, "loaded": [name for name in heavy if name in sys.modules]}))
"""


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_help_loads_no_heavy_library(script):
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, SCRIPTS[script], script, *HEAVY],
        cwd=REPO,
        env=script_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    seconds = time.perf_counter() - start
    assert proc.returncode == 0, proc.stderr[-2000:]
    outcome = json.loads(proc.stdout.strip().splitlines()[-1])
    assert outcome["code"] in (0, None), proc.stdout[-2000:]
    assert outcome["loaded"] == [], f"{script} --help imported {outcome['loaded']}"
    assert seconds < SECONDS, f"{script} --help took {seconds:.1f} s"
    assert proc.stdout.count("\n") > 3, f"{script} --help printed no help: {proc.stdout!r}"
