"""Sweeps on a real two-node SLURM cluster started on this machine (``scripts/slurm_cluster.sh``):
every cell a job, one of them across both nodes; one job requeued by SLURM (``SIGTERM``) and one
by submitit at a time-limit signal (``SIGUSR2``) while they train; every cell ends with the losses of
the same sweep run locally and the sweep logs each submission, requeue and job end. A rerun lists the
finished cells it skips; a cancelled job is one line and the sweep finishes the other cells.

The cluster needs root and Debian's slurm-wlm and munge (installed when absent); where it cannot
start, those tests say why and skip. Without the SLURM tools a sweep is refused before it writes.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
import yaml
from conftest import REPO

from clipmag.config.entry import run_entry_point
from clipmag.registry.front_ends import FRONT_ENDS, FrontEnd
from clipmag.runtime.logs import LOGGER_NAME, read_metrics
from clipmag_experiments.cli import sweep_main
from clipmag_experiments.design.grid import SweepConfig
from clipmag_experiments.sweep.run import load_sweep_config, run_sweep
from clipmag_experiments.sweep.status import sweep_status

CLUSTER = REPO / "scripts" / "slurm_cluster.sh"
TOY = ["train.steps=30", "train.save_every=5", "train.log_every=1", "dropout=0.3", "step_delay_s=0.3"]
ONE_NODE, TWO_NODES = "one-node/cosine/seed0", "two-nodes/learnable/seed0"


def _refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """The lines ``clipmag-sweep`` prints refusing ``launcher=slurm`` for a one-cell text sweep."""
    sweep = tmp_path / "sweep.yaml"
    output = tmp_path / "runs"
    sweep.write_text(yaml.safe_dump({"output_dir": str(output), "groups": [{"name": "g", "kind": "text"}]}))
    with pytest.raises(SystemExit) as exit_status:
        run_entry_point(sweep_main, ["--config", str(sweep), "launcher=slurm"])
    assert exit_status.value.code == 2
    assert not output.exists(), sorted(output.rglob("*"))  # no out.log, no sweep.json, no cell folder
    return capsys.readouterr().err.splitlines()


def test_a_slurm_sweep_without_the_slurm_tools_is_refused_before_it_writes(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))
    assert _refused(tmp_path, capsys) == [
        "error: launcher: slurm needs SLURM's commands on PATH, and sbatch, squeue, sinfo is not there: "
        "run the sweep on the cluster's login node, or set launcher=inprocess or launcher=torchrun"
    ]


@pytest.mark.skipif(shutil.which("sinfo") is None, reason="SLURM's commands are not installed here")
def test_a_slurm_sweep_whose_controller_does_not_answer_is_refused_before_it_writes(tmp_path, capsys, monkeypatch):
    conf = tmp_path / "slurm.conf"  # a cluster whose controller is not running
    conf.write_text("ClusterName=nowhere\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort=16999\n")
    monkeypatch.setenv("SLURM_CONF", str(conf))
    assert _refused(tmp_path, capsys) == [
        "error: launcher: slurm: the SLURM controller does not answer sinfo (slurm_load_partitions: Unable to "
        "contact slurm controller (connect failure)): check that slurmctld runs and SLURM_CONF names its slurm.conf"
    ]


@pytest.fixture(scope="module")
def slurm_conf(tmp_path_factory):
    state = tmp_path_factory.mktemp("slurm")
    env = {**os.environ, "CLIPMAG_SLURM_DIR": str(state)}
    started = subprocess.run(["bash", str(CLUSTER), "start"], env=env, capture_output=True, text=True, timeout=900)
    if started.returncode == 3:
        pytest.skip(started.stderr.strip())
    assert started.returncode == 0, started.stdout + started.stderr
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(FRONT_ENDS, "toy-engine", FrontEnd("toy-engine", "toy_engine_frontend"))
        patch.setenv("SLURM_CONF", str(state / "slurm.conf"))
        patch.setenv("PYTHONPATH", os.pathsep.join([str(REPO / "tests"), os.environ.get("PYTHONPATH", "")]))
        patch.chdir(state)
        yield state / "slurm.conf"
    subprocess.run(["bash", str(CLUSTER), "stop"], env=env, capture_output=True, timeout=120)


def _sweep(folder: Path, launcher: str, groups: list[dict]) -> Path:
    spec = {
        "name": "slurm-toy",
        "output_dir": str(folder / launcher),
        "launcher": launcher,
        "slurm": {"cpus_per_task": 1, "time_min": 20, "max_in_flight": 2, "poll_s": 1.0},
        "groups": groups,
    }
    path = folder / f"{launcher}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


TWO_GROUPS = [
    {"name": "one-node", "kind": "toy-engine", "heads": ["cosine"], "args": TOY},
    {
        "name": "two-nodes",
        "kind": "toy-engine",
        "heads": ["learnable"],
        "args": [*TOY, "dropout=0.0"],  # two ranks draw other dropout masks than one
        # submitit counts a SIGUSR2 as a time limit in a job of 10 minutes or less
        "slurm": {"nodes": 2, "tasks_per_node": 1, "time_min": 5},
    },
]


class _Lines(logging.Handler):
    """The messages of the "clipmag" logger while attached, at INFO as the sweep command logs."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []
        self.log = logging.getLogger(LOGGER_NAME)
        self.level_before = self.log.level

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def __enter__(self) -> list[str]:
        self.log.addHandler(self)
        self.log.setLevel(logging.INFO)
        return self.lines

    def __exit__(self, *exc: object) -> None:
        self.log.removeHandler(self)
        self.log.setLevel(self.level_before)


def _folder(sweep: Path, label: str) -> Path:
    """The run folder of the cell ``group/head/seed`` (its model is the config's, ``default``)."""
    group, head, seed = label.split("/")
    return sweep / group / "default" / head / seed


def _losses(cell: Path) -> list[float]:
    return [r["loss"] for r in read_metrics(cell / "metrics.jsonl", "train")]


def _when_training(folder: Path, label: str, action: list[str], errors: list[str]) -> str | None:
    """Run ``action`` + [the cell's job id] once the cell has trained a few steps; the job id."""
    deadline = time.time() + 400
    while time.time() < deadline:
        jobs = json.loads((folder / "jobs.json").read_text()) if (folder / "jobs.json").is_file() else {}
        metrics = _folder(folder, label) / "metrics.jsonl"
        if jobs.get(label) and metrics.is_file() and len(metrics.read_text().splitlines()) >= 8:
            job = jobs[label][-1]
            subprocess.run([*action, job], check=True, capture_output=True)
            return job
        time.sleep(0.5)
    errors.append(f"{label} never trained 8 steps")
    return None


def _requeue_when_training(folder: Path, label: str, action: list[str], errors: list[str]) -> None:
    """Make the cell's job requeue once it trains: ``scontrol requeue`` (SLURM sends SIGTERM and runs
    it again) or a time-limit signal (submitit requeues it)."""
    job = _when_training(folder, label, action, errors)
    if job is not None:
        _start_now_when_pending(job)


def _start_now_when_pending(job: str) -> None:
    """SLURM holds a requeued job about two minutes (``Reason=BeginTime``); move its start to now, as
    an administrator may, so the test does not wait."""
    for _ in range(120):
        shown = subprocess.run(["scontrol", "-o", "show", "job", job], capture_output=True, text=True).stdout
        if "JobState=PENDING" in shown:
            subprocess.run(["scontrol", "update", f"JobId={job}", "StartTime=now"], capture_output=True)
            return
        time.sleep(0.5)


@pytest.fixture(scope="module")
def requeued_sweep(slurm_conf, tmp_path_factory):
    """The two-group sweep run locally, then on the cluster with both jobs requeued while they
    train; the cluster sweep's folders and its log lines."""
    folder = tmp_path_factory.mktemp("requeued")
    local = load_sweep_config(_sweep(folder, "inprocess", TWO_GROUPS))
    run_sweep(local)
    cluster = load_sweep_config(_sweep(folder, "slurm", TWO_GROUPS))
    errors: list[str] = []
    requeues = [
        threading.Thread(target=_requeue_when_training, args=(Path(cluster.output_dir), label, action, errors))
        for label, action in [(ONE_NODE, ["scontrol", "requeue"]), (TWO_NODES, ["scancel", "--signal=USR2"])]
    ]
    for thread in requeues:
        thread.start()
    with _Lines() as lines:
        run_sweep(cluster)
    for thread in requeues:
        thread.join()
    assert not errors
    return local, cluster, lines


def _jobs(cfg: SweepConfig) -> dict[str, list[str]]:
    return json.loads((Path(cfg.output_dir) / "jobs.json").read_text())


@pytest.mark.slow
def test_a_sweep_runs_on_two_nodes_survives_requeues_and_matches_the_local_run(requeued_sweep):
    local, cluster, lines = requeued_sweep
    for label in (ONE_NODE, TWO_NODES):
        assert _losses(_folder(Path(cluster.output_dir), label)) == pytest.approx(
            _losses(_folder(Path(local.output_dir), label)), rel=1e-6
        ), label
    status = sweep_status(cluster)
    assert "2 cells and evaluations: 2 done" in status, status
    for label in (ONE_NODE, TWO_NODES):  # the same job, run again after its requeue
        [job] = _jobs(cluster)[label]
        shown = subprocess.run(["scontrol", "-o", "show", "job", job], capture_output=True, text=True).stdout
        assert "Restarts=1" in shown, shown
        assert f"{label}: submitted job {job}" in lines, lines
        assert f"{label}: job {job} requeued (restart 1)" in lines, lines
        assert f"{label}: job {job} ended COMPLETED" in lines, lines
    assert lines[-1] == "sweep ended: of 2 cells and evaluations, 2 done (0 finished earlier), 0 failed, 0 not started"


@pytest.mark.slow
def test_a_rerun_of_a_finished_slurm_sweep_lists_what_it_skips_and_submits_nothing(requeued_sweep):
    _, cluster, _ = requeued_sweep
    jobs = _jobs(cluster)
    with _Lines() as lines:
        run_sweep(cluster)
    assert lines == [
        f"[1/2] {ONE_NODE}: finished earlier, skipped",
        f"[2/2] {TWO_NODES}: finished earlier, skipped",
        "sweep ended: of 2 cells and evaluations, 2 done (2 finished earlier), 0 failed, 0 not started",
    ]
    assert _jobs(cluster) == jobs


@pytest.mark.slow
def test_a_cancelled_job_is_one_line_and_the_sweep_finishes_the_other_cells(slurm_conf, tmp_path, capsys):
    groups = [{"name": "one-node", "kind": "toy-engine", "heads": ["cosine", "dot"], "args": TOY}]
    path = _sweep(tmp_path, "slurm", groups)
    cancelled: list[str] = []
    errors: list[str] = []
    cancel = threading.Thread(
        target=lambda: cancelled.append(_when_training(tmp_path / "slurm", ONE_NODE, ["scancel"], errors))
    )
    cancel.start()
    with pytest.raises(SystemExit) as exit_status:
        run_entry_point(sweep_main, ["--config", str(path)])
    cancel.join()
    assert not errors and exit_status.value.code == 2
    [job] = cancelled
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    [line] = [line for line in err.splitlines() if f"job {job} ended" in line and not line.startswith("error:")]
    assert line.endswith(f"{ONE_NODE}: job {job} ended CANCELLED without its results; the sweep goes on without it")
    assert "one-node/dot/seed0: job" in err and "ended COMPLETED" in err  # the other cell ran to its end
    assert "sweep ended: of 2 cells and evaluations, 1 done (0 finished earlier), 1 failed, 0 not started" in err
    assert err.splitlines()[-1] == (
        "error: sweep jobs did not finish (clipmag-sweep status shows their logs): "
        f"{ONE_NODE}: job {job} ended CANCELLED"
    )
    status = sweep_status(load_sweep_config(path))
    assert f"cancelled      {job:>10}  {ONE_NODE}" in status, status
