"""A reader that stops early (``clipmag-make-text-shards --help | head -c 1``) ends every console
script quietly: exit status 141, as ``yes | head`` reports, and nothing on standard error."""

from __future__ import annotations

import json
import subprocess
import sys

import tomllib
from conftest import REPO, script_env

SCRIPTS = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]


def test_every_console_script_is_silent_on_a_broken_pipe(tmp_path):
    results = tmp_path / "results.json"
    specs = [f"{name}={target}" for name, target in SCRIPTS.items()]
    worker = [sys.executable, str(REPO / "tests" / "pipe_worker.py"), str(results), *specs]
    subprocess.run(worker, cwd=REPO, env=script_env(), check=True, timeout=600, capture_output=True)
    outcomes = json.loads(results.read_text())
    assert set(outcomes) == set(SCRIPTS)
    loud = {name: outcome for name, outcome in outcomes.items() if outcome != {"code": 141, "stderr": ""}}
    assert not loud
