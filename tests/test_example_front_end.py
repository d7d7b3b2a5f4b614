"""The worked example of docs/architecture.md, examples/bag_of_words, is a complete front end: it
trains on the core's loop under two heads, writes results.json with the head record its export
carries, passes the contract check, and registers so that a sweep can check its cells."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
from conftest import REPO, script_env

from clipmag.registry.front_ends import get_front_end
from clipmag.results.record import read_results
from clipmag.runtime.logs import read_metrics
from clipmag.scoring.head_record import HeadRecord

SHORT = ["--steps", "8", "train.eval_every=4", "train.log_every=1", "train.device=cpu", "train.progress=false"]


def train(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "examples.bag_of_words.cli", *args]
    return subprocess.run(command, cwd=REPO, env=script_env(), capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("head", ["qnorm", "cosine"])
def test_the_example_trains_under_a_head_and_records_it(tmp_path, head):
    out = tmp_path / head
    proc = train("--norm", head, "--output", str(out), *SHORT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    losses = [row["loss"] for row in read_metrics(out / "metrics.jsonl", "train")]
    assert len(losses) == 8 and all(math.isfinite(loss) for loss in losses)
    assert min(losses[4:]) < losses[0]  # it learns: later batches score below the first
    results = read_results(out / "results.json")
    assert results["run"]["front_end"] == "bag-of-words" and results["head"]["head"]["name"] == head
    assert results["head"] == HeadRecord.read(out / "export").to_dict()
    test = results["metrics"]["stdlib-functions"]
    assert 0.0 < test["MRR"] <= 1.0 and f"stdlib-functions: MRR {test['MRR']:.4f}" in proc.stdout
    assert any(row["kind"] == "eval" and "MRR" in row for row in read_metrics(out / "metrics.jsonl"))


def test_a_bad_setting_is_one_line_before_anything_runs(tmp_path):
    proc = train("--output", str(tmp_path / "run"), "data.modules=[no_such_module]", "--batch-size", "1")
    assert proc.returncode == 2 and not (tmp_path / "run").exists()
    (line,) = proc.stderr.strip().splitlines()
    assert "data.modules: no module 'no_such_module'" in line and "data.batch_size must be >= 2" in line


def test_registered_the_example_is_a_front_end_a_sweep_can_check():
    from examples.bag_of_words.plugin import register

    register()
    cfg = get_front_end("bag-of-words").check(["--norm", "dnorm", "--output", "runs/x", "--dim", "8"])
    assert cfg.head.name == "dnorm" and cfg.model.dim == 8 and cfg.loss.direction == "q2d" and cfg.loss.scale == 20.0
