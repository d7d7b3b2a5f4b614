"""Sweeps on a SLURM cluster (``launcher: slurm``): every cell one job, submitted through submitit.

Each cell becomes a job with the resources of the sweep's ``slurm`` section, where its group's
``slurm`` mapping overrides single keys (a 7B group asks for more GPUs and time than a MiniLM one).
A job runs the cell's trainer on every task; the ranks come from ``srun``
(:func:`clipmag.runtime.distributed.launcher_environment`), one task per GPU, across ``nodes``.
At most ``max_in_flight`` jobs are queued or running at once; a cell whose variant is chosen from
another group, or whose run is a finished cell's (``reuse_same_runs``), waits until what it reads is
finished, exactly as it would run locally. A finished cell's evaluations are jobs of their own.

Preemption and time limits: the trainer saves its checkpoint at the next step boundary when
SLURM signals the job (:mod:`clipmag.train.stop_signals`; the job asks for ``SIGUSR2``
``signal_delay_s`` before its limit). SLURM requeues a preempted job itself; before a time limit the
job requeues itself (``scontrol requeue``, at most ``max_requeues`` times). Either way the cell's
``--resume latest`` continues the run where it stopped: the trainer's resume, not a restart.

The sweep folder keeps ``jobs.json`` (cell -> job id, log files, submissions) and submitit's
``slurm/`` folder (each job's script, stdout and stderr); ``clipmag-sweep status`` reads both.
A resubmitted sweep skips finished cells as a local one does and never submits a cell whose job is
still queued or running.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from clipmag.config.checks import ConfigError
from clipmag.experiments.choice import choose_variant
from clipmag.experiments.finished import unfinished_reason
from clipmag.experiments.grid import Cell, SweepConfig, SweepEvaluation
from clipmag.experiments.same_run import finished_twin, share_results
from clipmag.experiments.slurm_settings import SlurmResources, resources_for
from clipmag.registry.evaluations import get_evaluation
from clipmag.registry.front_ends import FrontEnd, get_front_end
from clipmag.results.record import RESULTS_FILE
from clipmag.runtime.distributed import environment_rank, launcher_environment
from clipmag.runtime.logs import logger
from clipmag.storage.files import write_text_atomic
from clipmag.train.run import EXPORT_DIR
from clipmag.train.stop_signals import RunStopped

__all__ = ["JOBS_FILE", "LOG_DIR", "CellJob", "EvaluationJob", "JobsRecord", "job_states", "run_on_slurm"]

JOBS_FILE = "jobs.json"
LOG_DIR = "slurm"
ACTIVE_STATES = ("PENDING", "RUNNING", "REQUEUED", "CONFIGURING", "COMPLETING", "SUSPENDED", "RESIZING")


class CellJob:
    """What a cell's job runs on every task: the cell's trainer (by module, so a job needs nothing
    registered in the submitting process), its ranks from ``srun``."""

    def __init__(self, module: str, argv: Sequence[str], max_requeues: int) -> None:
        self.module, self.argv, self.max_requeues = module, list(argv), max_requeues

    def __call__(self) -> None:
        launcher_environment()
        try:
            FrontEnd("cell", self.module).main(self.argv)
        except RunStopped as stopped:
            if stopped.signal_name != "SIGTERM" and environment_rank() == 0:
                _requeue_self(self.max_requeues)  # a time limit ahead; SLURM requeues the preempted itself
            raise


class EvaluationJob:
    """What a finished cell's evaluation job runs: the evaluation on the cell's export."""

    def __init__(self, kind: str, export: str, folder: str, argv: Sequence[str]) -> None:
        self.kind, self.export, self.folder, self.argv = kind, export, folder, list(argv)

    def __call__(self) -> None:
        get_evaluation(self.kind).run(Path(self.export), Path(self.folder), self.argv)


def _requeue_self(max_requeues: int) -> None:
    restarts = int(os.environ.get("SLURM_RESTART_COUNT", "0"))
    if restarts >= max_requeues:
        logger.warning("not requeued: this job was requeued %d times (max_requeues %d)", restarts, max_requeues)
        return
    subprocess.run(["scontrol", "requeue", os.environ["SLURM_JOB_ID"]], check=True)
    logger.info("requeued job %s (restart %d of at most %d)", os.environ["SLURM_JOB_ID"], restarts + 1, max_requeues)


class JobsRecord:
    """``jobs.json``: per cell (and evaluation) label its job ids, newest last, and log folder."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / JOBS_FILE
        self.jobs: dict[str, list[str]] = json.loads(self.path.read_text()) if self.path.is_file() else {}

    def add(self, label: str, job_id: str) -> None:
        self.jobs.setdefault(label, []).append(job_id)
        write_text_atomic(self.path, json.dumps(self.jobs, indent=1, sort_keys=True) + "\n")

    def latest(self, label: str) -> str | None:
        ids = self.jobs.get(label)
        return ids[-1] if ids else None


def _query(command: Sequence[str]) -> str:
    """A SLURM command's output; empty where it fails or is not installed (no accounting, no SLURM)."""
    try:
        out = subprocess.run(list(command), capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout if out.returncode == 0 else ""


def _sacct_states(job_ids: Sequence[str]) -> dict[str, str]:
    states = {}
    for row in _query(["sacct", "-X", "-n", "-P", "-o", "JobID,State", "-j", ",".join(job_ids)]).splitlines():
        job, _, state = row.partition("|")
        states[job.split("_")[0]] = state.split()[0] if state else "UNKNOWN"
    return states


def _scontrol_state(job_id: str) -> str:
    found = re.search(r"\bJobState=(\S+)", _query(["scontrol", "-o", "show", "job", job_id]))
    return found.group(1) if found else "ENDED"  # no longer known to the controller


def job_states(job_ids: Sequence[str]) -> dict[str, str]:
    """SLURM's state of each job, e.g. ``PENDING``, ``RUNNING``, ``COMPLETED``, ``FAILED``,
    ``TIMEOUT``: from ``sacct`` where accounting is kept, else from the controller (``scontrol``),
    which forgets a job ``MinJobAge`` after it ended (``ENDED``)."""
    if not job_ids:
        return {}
    states = _sacct_states(job_ids)
    return {job: states.get(job) or _scontrol_state(job) for job in job_ids}


def _executor(folder: Path, resources: SlurmResources, name: str) -> Any:
    try:
        import submitit
    except ImportError as err:
        raise ConfigError(f"launcher: slurm needs submitit ({err}); pip install submitit") from None
    executor = submitit.AutoExecutor(folder=folder / LOG_DIR / "%j", cluster="slurm")
    executor.update_parameters(name=name, **resources.executor_parameters())
    return executor


class _Scheduler:
    """Submits ready cells and evaluations while fewer than ``max_in_flight`` jobs are out."""

    def __init__(self, cfg: SweepConfig, resources: Mapping[str, SlurmResources]) -> None:
        self.cfg, self.resources, self.folder = cfg, resources, Path(cfg.output_dir)
        self.record = JobsRecord(self.folder)
        self.in_flight: dict[str, str] = {}  # label -> job id

    def adopt_running(self, labels: Sequence[str]) -> None:
        """Jobs of an earlier submission still queued or running count as in flight, not resubmitted."""
        latest = {label: self.record.latest(label) for label in labels}
        states = job_states([job for job in latest.values() if job])
        for label, job in latest.items():
            if job and states.get(job) in ACTIVE_STATES:
                self.in_flight[label] = job
                logger.info("%s: job %s still %s, not submitted again", label, job, states[job].lower())

    def has_room(self) -> bool:
        return len(self.in_flight) < self.cfg.slurm.max_in_flight

    def submit(self, label: str, job: Any, resources: SlurmResources) -> None:
        submitted = _executor(self.folder, resources, label).submit(job)
        self.in_flight[label] = str(submitted.job_id)
        self.record.add(label, str(submitted.job_id))
        logger.info("%s: submitted job %s", label, submitted.job_id)

    def finished_jobs(self) -> dict[str, str]:
        """The labels whose job left the queue since the last call, with its final state."""
        states = job_states(list(self.in_flight.values()))
        done = {label: states[job] for label, job in self.in_flight.items() if states[job] not in ACTIVE_STATES}
        for label in done:
            del self.in_flight[label]
        return done


def _ready(cell: Cell, every_cell: Sequence[Cell]) -> bool:
    """Whether what the cell reads before it runs is there: its choice group finished."""
    if cell.choice is None:
        return True
    sources = [c for c in every_cell if c.group == cell.choice.group and c.model == cell.model]
    return all(unfinished_reason(c) is None for c in sources)


def _evaluation_label(cell: Cell, evaluation: SweepEvaluation) -> str:
    return f"{cell.label}/{evaluation.folder_name}"


def _start_cell(scheduler: _Scheduler, cell: Cell, every_cell: Sequence[Cell]) -> None:
    """Submit the cell's job, or take a finished twin's results (``reuse_same_runs``)."""
    chosen = choose_variant(cell, every_cell)
    twin = finished_twin(chosen, every_cell) if scheduler.cfg.reuse_same_runs else None
    if twin is not None:
        share_results(chosen, twin)
        logger.info("%s: the same run as %s: its results taken", cell.label, twin.label)
        return
    chosen.write_description()
    resources = scheduler.resources[cell.group]
    module = get_front_end(cell.kind).module
    scheduler.submit(cell.label, CellJob(module, chosen.argv, resources.max_requeues), resources)


def _start_evaluation(scheduler: _Scheduler, cell: Cell, evaluation: SweepEvaluation) -> None:
    folder = cell.evaluation_folder(evaluation)
    job = EvaluationJob(evaluation.kind, str(cell.directory / EXPORT_DIR), str(folder), evaluation.argv())
    scheduler.submit(_evaluation_label(cell, evaluation), job, scheduler.resources[cell.group])


def run_on_slurm(cells: Sequence[Cell], every_cell: Sequence[Cell], cfg: SweepConfig) -> None:
    """Run the unfinished ``cells`` and every evaluation as SLURM jobs and wait for them; raises,
    naming them, when jobs ended without their results (``clipmag-sweep status`` shows the logs)."""
    resources = {g.name: resources_for(cfg.slurm, g.slurm, g.name) for g in cfg.groups}
    scheduler = _Scheduler(cfg, resources)
    labels = [c.label for c in cells] + [_evaluation_label(c, e) for c in cells for e in c.evaluations]
    scheduler.adopt_running(labels)
    cells_left = list(cells)
    evaluations: list[tuple[Cell, SweepEvaluation]] = []
    failed: dict[str, str] = {}
    done: set[str] = set()  # results seen; a job may still be exiting after writing them
    while True:
        for label, state in scheduler.finished_jobs().items():
            if label not in done:
                failed[label] = f"job {scheduler.record.latest(label)} ended {state}"  # forgiven below if finished
        finished = [c for c in cells_left if unfinished_reason(c) is None]
        for cell in finished:
            done.add(cell.label)
            failed.pop(cell.label, None)
            evaluations += [(cell, e) for e in cell.evaluations]
        cells_left = [c for c in cells_left if c not in finished and c.label not in failed]
        for cell, evaluation in evaluations:
            if (cell.evaluation_folder(evaluation) / RESULTS_FILE).is_file():
                done.add(_evaluation_label(cell, evaluation))
                failed.pop(_evaluation_label(cell, evaluation), None)
        settled = done | set(failed)
        evaluations = [(c, e) for c, e in evaluations if _evaluation_label(c, e) not in settled]
        for cell in cells_left:
            if cell.label not in scheduler.in_flight and scheduler.has_room() and _ready(cell, every_cell):
                _start_cell(scheduler, cell, every_cell)
        for cell, evaluation in evaluations:
            if _evaluation_label(cell, evaluation) not in scheduler.in_flight and scheduler.has_room():
                _start_evaluation(scheduler, cell, evaluation)
        if not scheduler.in_flight and not evaluations and all(not _ready(c, every_cell) for c in cells_left):
            break
        time.sleep(cfg.slurm.poll_s)
    stuck = [c.label for c in cells_left]
    if failed or stuck:
        reasons = [f"{label}: {why}" for label, why in sorted(failed.items())]
        reasons += [f"{label}: waits for a group that did not finish" for label in stuck]
        raise RuntimeError("sweep jobs did not finish (clipmag-sweep status shows their logs): " + "; ".join(reasons))
