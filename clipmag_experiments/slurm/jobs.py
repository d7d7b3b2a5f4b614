"""What SLURM says about a sweep's jobs, and whether this machine can submit any at all.

``jobs.json`` in the sweep folder maps every cell (and evaluation) to its job ids; the states and
restart counts come from the controller (``squeue``), which forgets a job ``MinJobAge`` after it
ended, and for such a job from the accounting database (``sacct``) where one is kept.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from clipmag.errors import ConfigError, UserError
from clipmag.storage.files import write_text_atomic

__all__ = [
    "ACTIVE_STATES",
    "JOBS_FILE",
    "LOG_DIR",
    "JobsRecord",
    "SweepUnfinished",
    "check_cluster",
    "job_states",
    "poll_jobs",
]

JOBS_FILE = "jobs.json"
LOG_DIR = "slurm"
ACTIVE_STATES = ("PENDING", "RUNNING", "REQUEUED", "CONFIGURING", "COMPLETING", "SUSPENDED", "RESIZING")
SUBMIT_TOOLS = ("sbatch", "squeue", "sinfo")  # submitit submits with sbatch; the sweep polls with squeue
ANSWER_TIMEOUT_S = 60
SINFO_TIMEOUT_S = 90  # sinfo itself retries an unreadable slurm.conf for 60 s before it says why


class SweepUnfinished(UserError):
    """Cells or evaluations of a sweep ended without their results; the message names each with its
    job and state, and ``clipmag-sweep status`` shows their logs."""


def check_cluster() -> None:
    """Refuse ``launcher: slurm`` in one line where this machine cannot submit: SLURM's commands
    absent from ``PATH``, or a controller that does not answer ``sinfo``. The sweep calls this before
    it writes anything, so a refused sweep leaves its folder as it was."""
    missing = [tool for tool in SUBMIT_TOOLS if shutil.which(tool) is None]
    if missing:
        raise ConfigError(
            f"launcher: slurm needs SLURM's commands on PATH, and {', '.join(missing)} is not there: "
            "run the sweep on the cluster's login node, or set launcher=inprocess or launcher=torchrun"
        )
    try:
        answer = subprocess.run(["sinfo", "-h", "-o", "%P"], capture_output=True, text=True, timeout=SINFO_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        answer = None
    if answer is None or answer.returncode != 0:
        why = answer.stderr.strip().splitlines()[-1] if answer and answer.stderr.strip() else "no answer"
        raise ConfigError(
            f"launcher: slurm: the SLURM controller does not answer sinfo ({why}): "
            "check that slurmctld runs and SLURM_CONF names its slurm.conf"
        )


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
        out = subprocess.run(list(command), capture_output=True, text=True, timeout=ANSWER_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout if out.returncode == 0 else ""


def _controller_jobs(job_ids: Sequence[str]) -> dict[str, tuple[str, int]]:
    """State and restart count of each job the controller still knows, in one ``squeue`` call."""
    command = ["squeue", "-h", "-t", "all", "-j", ",".join(job_ids), "-O", "JobID:|,State:|,RestartCnt"]
    jobs = {}
    for row in _query(command).splitlines():
        job, state, restarts = (part.strip() for part in row.split("|"))
        jobs[job] = (state, int(restarts or 0))
    return jobs


def _sacct_states(job_ids: Sequence[str]) -> dict[str, str]:
    states = {}
    for row in _query(["sacct", "-X", "-n", "-P", "-o", "JobID,State", "-j", ",".join(job_ids)]).splitlines():
        job, _, state = row.partition("|")
        states[job.split("_")[0]] = state.split()[0] if state else "UNKNOWN"  # "CANCELLED by 0"
    return states


def poll_jobs(job_ids: Sequence[str]) -> dict[str, tuple[str, int]]:
    """Each job's SLURM state (``PENDING``, ``RUNNING``, ``COMPLETED``, ``FAILED``, ``CANCELLED``,
    ``TIMEOUT``, ...) and how often it was requeued. A job the controller forgot shows its state from
    ``sacct`` where accounting is kept, else ``ENDED``, with 0 restarts."""
    if not job_ids:
        return {}
    known = _controller_jobs(job_ids)
    forgotten = [job for job in job_ids if job not in known]
    accounted = _sacct_states(forgotten) if forgotten else {}
    return {job: known.get(job) or (accounted.get(job, "ENDED"), 0) for job in job_ids}


def job_states(job_ids: Sequence[str]) -> dict[str, str]:
    """Each job's SLURM state (:func:`poll_jobs` without the restart counts)."""
    return {job: state for job, (state, _) in poll_jobs(job_ids).items()}
