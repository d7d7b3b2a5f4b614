"""A sweep on a real two-node SLURM cluster started on this machine (``scripts/slurm_cluster.sh``):
every cell a job, one of them across both nodes, one requeued while it trains; every cell ends with
the losses of the same sweep run locally, and ``clipmag-sweep status`` shows them done.

The cluster needs root and Debian's slurm-wlm and munge (installed when absent); where it cannot
start, the test says why and skips.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest
import yaml
from conftest import REPO

from clipmag.experiments.grid import SweepConfig
from clipmag.experiments.status import sweep_status
from clipmag.experiments.sweep import load_sweep_config, run_sweep
from clipmag.registry.front_ends import FRONT_ENDS, FrontEnd
from clipmag.runtime.logs import read_metrics

CLUSTER = REPO / "scripts" / "slurm_cluster.sh"
TOY = ["train.steps=30", "train.save_every=5", "train.log_every=1", "dropout=0.3", "step_delay_s=0.3"]


@pytest.fixture(scope="module")
def slurm_conf(tmp_path_factory):
    state = tmp_path_factory.mktemp("slurm")
    env = {**os.environ, "CLIPMAG_SLURM_DIR": str(state)}
    started = subprocess.run(["bash", str(CLUSTER), "start"], env=env, capture_output=True, text=True, timeout=900)
    if started.returncode == 3:
        pytest.skip(started.stderr.strip())
    assert started.returncode == 0, started.stdout + started.stderr
    yield state / "slurm.conf"
    subprocess.run(["bash", str(CLUSTER), "stop"], env=env, capture_output=True, timeout=120)


def _sweep(tmp_path: Path, launcher: str) -> SweepConfig:
    spec = {
        "name": "slurm-toy",
        "output_dir": str(tmp_path / launcher),
        "launcher": launcher,
        "slurm": {"cpus_per_task": 1, "time_min": 20, "max_in_flight": 2, "poll_s": 1.0},
        "groups": [
            {"name": "one-node", "kind": "toy-engine", "heads": ["cosine"], "args": TOY},
            {
                "name": "two-nodes",
                "kind": "toy-engine",
                "heads": ["learnable"],
                "args": [*TOY, "dropout=0.0"],  # two ranks draw other dropout masks than one
                "slurm": {"nodes": 2, "tasks_per_node": 1},
            },
        ],
    }
    path = tmp_path / f"{launcher}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return load_sweep_config(path)


def _folder(sweep: Path, label: str) -> Path:
    """The run folder of the cell ``group/head/seed`` (its model is the config's, ``default``)."""
    group, head, seed = label.split("/")
    return sweep / group / "default" / head / seed


def _losses(cell: Path) -> list[float]:
    return [r["loss"] for r in read_metrics(cell / "metrics.jsonl", "train")]


def _requeue_when_training(folder: Path, label: str, conf: Path, errors: list[str]) -> None:
    """Requeue the cell's job once it has trained a few steps (SLURM sends it SIGTERM, then runs it again)."""
    env = {**os.environ, "SLURM_CONF": str(conf)}
    deadline = time.time() + 400
    while time.time() < deadline:
        jobs = json.loads((folder / "jobs.json").read_text()) if (folder / "jobs.json").is_file() else {}
        metrics = _folder(folder, label) / "metrics.jsonl"
        if jobs.get(label) and metrics.is_file() and len(metrics.read_text().splitlines()) >= 8:
            job = jobs[label][-1]
            subprocess.run(["scontrol", "requeue", job], env=env, check=True, capture_output=True)
            _start_now_when_pending(job, env)
            return
        time.sleep(0.5)
    errors.append(f"{label} never trained 8 steps")


def _start_now_when_pending(job: str, env: dict[str, str]) -> None:
    """SLURM holds a requeued job about two minutes (``Reason=BeginTime``); move its start to now, as
    an administrator may, so the test does not wait."""
    for _ in range(120):
        shown = subprocess.run(["scontrol", "-o", "show", "job", job], env=env, capture_output=True, text=True).stdout
        if "JobState=PENDING" in shown:
            subprocess.run(["scontrol", "update", f"JobId={job}", "StartTime=now"], env=env, capture_output=True)
            return
        time.sleep(0.5)


@pytest.mark.slow
def test_a_sweep_runs_on_two_nodes_survives_a_requeue_and_matches_the_local_run(tmp_path, slurm_conf, monkeypatch):
    monkeypatch.setitem(FRONT_ENDS, "toy-engine", FrontEnd("toy-engine", "toy_engine_frontend"))
    monkeypatch.setenv("SLURM_CONF", str(slurm_conf))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO / "tests"), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.chdir(tmp_path)
    local = _sweep(tmp_path, "inprocess")
    run_sweep(local)
    cluster = _sweep(tmp_path, "slurm")
    errors: list[str] = []
    requeue = threading.Thread(
        target=_requeue_when_training,
        args=(Path(cluster.output_dir), "one-node/cosine/seed0", slurm_conf, errors),
    )
    requeue.start()
    run_sweep(cluster)
    requeue.join()
    assert not errors
    for label in ("one-node/cosine/seed0", "two-nodes/learnable/seed0"):
        assert _losses(_folder(Path(cluster.output_dir), label)) == pytest.approx(
            _losses(_folder(Path(local.output_dir), label)), rel=1e-6
        ), label
    status = sweep_status(cluster)
    assert "2 cells and evaluations: 2 done" in status, status
    job = json.loads((Path(cluster.output_dir) / "jobs.json").read_text())["one-node/cosine/seed0"][-1]
    shown = subprocess.run(["scontrol", "-o", "show", "job", job], capture_output=True, text=True).stdout
    assert "Restarts=1" in shown, shown  # the same job, run again after the requeue
