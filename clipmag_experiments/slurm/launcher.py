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
``signal_delay_s`` before its limit). SLURM requeues a preempted job itself; at a time limit
submitit requeues it (:class:`CellJob`, at most ``max_requeues`` times). Either way the cell's
``--resume latest`` continues the run where it stopped: the trainer's resume, not a restart.

The sweep logs every submission, requeue and job end (with its state) and, at its end, the counts.
A job that ended without its cell's results is one line; the sweep goes on with the other cells and
ends with :class:`~clipmag_experiments.slurm.jobs.SweepUnfinished` naming every such job. The sweep
folder keeps ``jobs.json`` (cell -> job ids) and submitit's ``slurm/`` folder (each job's script,
stdout and stderr); ``clipmag-sweep status`` reads both. A resubmitted sweep lists the cells it
skips as finished, as a local one does, and never submits a cell whose job is still queued or running.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import submitit

from clipmag.registry.evaluations import get_evaluation
from clipmag.registry.front_ends import FrontEnd, get_front_end
from clipmag.results.record import RESULTS_FILE
from clipmag.runtime.distributed import launcher_environment
from clipmag.runtime.logs import logger
from clipmag.train.diverged_record import read_divergence
from clipmag.train.run import EXPORT_DIR
from clipmag.train.stop_signals import RunStopped
from clipmag_experiments.cells.choice import choose_variant
from clipmag_experiments.cells.evaluation_args import evaluation_argv
from clipmag_experiments.cells.finished import unfinished_reason
from clipmag_experiments.cells.same_run import finished_twin, share_results
from clipmag_experiments.design.grid import Cell, SweepConfig, SweepEvaluation
from clipmag_experiments.design.slurm_settings import SlurmResources, resources_for
from clipmag_experiments.slurm.jobs import ACTIVE_STATES, LOG_DIR, JobsRecord, SweepUnfinished, poll_jobs

__all__ = ["CellJob", "EvaluationJob", "run_on_slurm"]


class CellJob(submitit.helpers.Checkpointable):
    """What a cell's job runs on every task: the cell's trainer (by module, so a job needs nothing
    registered in the submitting process), its ranks from ``srun``.

    At a time limit submitit does the requeue: its ``SIGUSR2`` handler calls :meth:`checkpoint`
    (the inherited one submits this same job again, whose ``--resume latest`` continues the run),
    runs ``scontrol requeue`` and counts time limits against ``max_num_timeout`` (the group's
    ``max_requeues``), so preemptions, which SLURM requeues itself, are not counted. While the loop
    trains, the trainer's own handlers (:mod:`clipmag.train.stop_signals`) take the signal instead:
    submitit's would exit from the middle of a step on whichever rank it runs, losing the steps since
    the last save, where the trainer saves at the next step boundary on which every rank agrees. Once
    saved, the signal goes on to submitit's handler; one arriving outside the loop (loading, the final
    export) reaches it directly and the requeued job resumes from the latest checkpoint.
    """

    def __init__(self, module: str, argv: Sequence[str]) -> None:
        self.module, self.argv = module, list(argv)

    def __call__(self) -> None:
        launcher_environment()
        try:
            FrontEnd("cell", self.module).main(self.argv)
        except RunStopped as stopped:
            if stopped.signal_name == f"SIG{submitit.JobEnvironment.USR_SIG}":  # a time limit ahead
                _hand_on(signal.Signals[stopped.signal_name])
            raise  # SIGTERM: preempted, requeued or cancelled; SLURM requeues a preempted job itself


def _hand_on(sig: signal.Signals) -> None:
    """Call the handler the process has for ``sig`` now that the trainer's are gone (submitit's:
    on rank 0 it requeues the job and exits, on the other ranks it returns)."""
    handler = signal.getsignal(sig)
    if callable(handler):
        handler(sig, None)


class EvaluationJob:
    """What a finished cell's evaluation job runs: the evaluation on the cell's export. Not
    checkpointable: it keeps no checkpoint, so submitit ends it at a time limit instead of starting
    it again from the beginning."""

    def __init__(self, kind: str, export: str, folder: str, argv: Sequence[str]) -> None:
        self.kind, self.export, self.folder, self.argv = kind, export, folder, list(argv)

    def __call__(self) -> None:
        get_evaluation(self.kind).run(Path(self.export), Path(self.folder), self.argv)


def _executor(folder: Path, resources: SlurmResources, name: str) -> Any:
    executor = submitit.AutoExecutor(
        folder=folder / LOG_DIR / "%j", cluster="slurm", slurm_max_num_timeout=resources.max_requeues
    )
    executor.update_parameters(name=name, **resources.executor_parameters())
    return executor


class _Scheduler:
    """Submits ready cells and evaluations while fewer than ``max_in_flight`` jobs are out, and
    says when one of them is requeued or ends."""

    def __init__(self, cfg: SweepConfig, resources: Mapping[str, SlurmResources]) -> None:
        self.cfg, self.resources, self.folder = cfg, resources, Path(cfg.output_dir)
        self.record = JobsRecord(self.folder)
        self.in_flight: dict[str, str] = {}  # label -> job id
        self.restarts: dict[str, int] = {}  # label -> requeues of its job seen so far

    def adopt_running(self, labels: Sequence[str]) -> None:
        """Jobs of an earlier submission still queued or running count as in flight, not resubmitted."""
        latest = {label: self.record.latest(label) for label in labels}
        jobs = poll_jobs([job for job in latest.values() if job])
        for label, job in latest.items():
            if job and jobs[job][0] in ACTIVE_STATES:
                self.in_flight[label], self.restarts[label] = job, jobs[job][1]
                logger.info("%s: job %s still %s, not submitted again", label, job, jobs[job][0].lower())

    def has_room(self) -> bool:
        return len(self.in_flight) < self.cfg.slurm.max_in_flight

    def submit(self, label: str, job: Any, resources: SlurmResources) -> None:
        submitted = _executor(self.folder, resources, label).submit(job)
        self.in_flight[label], self.restarts[label] = str(submitted.job_id), 0
        self.record.add(label, str(submitted.job_id))
        logger.info("%s: submitted job %s", label, submitted.job_id)

    def ended_jobs(self) -> dict[str, str]:
        """The labels whose job left the queue since the last call, with its final state; a line
        for each job requeued since (its restart count grew)."""
        jobs = poll_jobs(list(self.in_flight.values()))
        ended = {}
        for label, job in list(self.in_flight.items()):
            state, restarts = jobs[job]
            if restarts > self.restarts[label]:
                self.restarts[label] = restarts
                logger.info("%s: job %s requeued (restart %d)", label, job, restarts)
            if state not in ACTIVE_STATES:
                ended[label] = state
                del self.in_flight[label]
        return ended


def _ready(cell: Cell, every_cell: Sequence[Cell]) -> bool:
    """Whether what the cell reads before it runs is there: its choice group finished (a candidate
    that diverged has finished too: the choice reads it as not choosable)."""
    if cell.choice is None:
        return True
    sources = [c for c in every_cell if c.group == cell.choice.group and c.model == cell.model]
    return all(unfinished_reason(c) is None or read_divergence(c.directory) is not None for c in sources)


def _evaluation_label(cell: Cell, evaluation: SweepEvaluation) -> str:
    return f"{cell.label}/{evaluation.folder_name}"


def _evaluation_done(cell: Cell, evaluation: SweepEvaluation) -> bool:
    return (cell.evaluation_folder(evaluation) / RESULTS_FILE).is_file()


def _finished_earlier(cells: Sequence[Cell]) -> set[str]:
    """The labels of the cells and evaluations finished before this run, each listed as skipped
    (the local launcher's lines); a cell with results that do not count says why it runs again."""
    earlier, total = set(), len(cells)
    for i, cell in enumerate(cells, 1):
        reason = unfinished_reason(cell)
        if reason is None:
            earlier.add(cell.label)
            logger.info("[%d/%d] %s: finished earlier, skipped", i, total, cell.label)
            for evaluation in [e for e in cell.evaluations if _evaluation_done(cell, e)]:
                earlier.add(_evaluation_label(cell, evaluation))
                logger.info("[%d/%d] %s: finished earlier, skipped", i, total, _evaluation_label(cell, evaluation))
        elif (cell.directory / RESULTS_FILE).exists():
            logger.warning("[%d/%d] %s: not finished (%s): running it again", i, total, cell.label, reason)
    return earlier


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
    scheduler.submit(cell.label, CellJob(get_front_end(cell.kind).module, chosen.argv), resources)


def _start_evaluation(scheduler: _Scheduler, cell: Cell, evaluation: SweepEvaluation) -> None:
    folder = cell.evaluation_folder(evaluation)
    job = EvaluationJob(
        evaluation.kind, str(cell.directory / EXPORT_DIR), str(folder), evaluation_argv(cell, evaluation)
    )
    scheduler.submit(_evaluation_label(cell, evaluation), job, scheduler.resources[cell.group])


def _note_ends(ended: Mapping[str, str], done: set[str], failed: dict[str, str], record: JobsRecord) -> None:
    """One line per ended job; one that ended without its results (not in ``done``) goes to ``failed``."""
    for label, state in ended.items():
        job = record.latest(label)
        if label in done:
            logger.info("%s: job %s ended %s", label, job, state)
        else:
            failed[label] = f"job {job} ended {state}"
            logger.warning("%s: job %s ended %s without its results; the sweep goes on without it", label, job, state)


def _finish(done: set[str], earlier: set[str], failed: Mapping[str, str], stuck: Sequence[str]) -> None:
    """The sweep's last line (its counts); raises naming every job that ended without its results."""
    total = len(done) + len(failed) + len(stuck)
    logger.info(
        "sweep ended: of %d cells and evaluations, %d done (%d finished earlier), %d failed, %d not started",
        *(total, len(done), len(earlier), len(failed), len(stuck)),
    )
    reasons = [f"{label}: {why}" for label, why in sorted(failed.items())]
    reasons += [f"{label}: waits for a group that did not finish" for label in stuck]
    if reasons:
        raise SweepUnfinished(
            "sweep jobs did not finish (clipmag-sweep status shows their logs): " + "; ".join(reasons)
        )


def run_on_slurm(cells: Sequence[Cell], every_cell: Sequence[Cell], cfg: SweepConfig) -> None:
    """Run the unfinished ``cells`` and every evaluation as SLURM jobs and wait for them; raises
    :class:`SweepUnfinished`, naming them, when jobs ended without their results."""
    resources = {g.name: resources_for(cfg.slurm, g.slurm, g.name) for g in cfg.groups}
    scheduler = _Scheduler(cfg, resources)
    labels = [c.label for c in cells] + [_evaluation_label(c, e) for c in cells for e in c.evaluations]
    scheduler.adopt_running(labels)
    earlier = _finished_earlier(cells)
    done = set(earlier)  # results seen; a job may still be exiting after writing them
    failed: dict[str, str] = {}
    cells_left = [c for c in cells if c.label not in done]
    evaluations = [(c, e) for c in cells if c.label in done for e in c.evaluations]
    while True:
        ended = scheduler.ended_jobs()
        for cell in [c for c in cells_left if unfinished_reason(c) is None]:
            done.add(cell.label)
            evaluations += [(cell, e) for e in cell.evaluations]
        done.update(_evaluation_label(c, e) for c, e in evaluations if _evaluation_done(c, e))
        _note_ends(ended, done, failed, scheduler.record)
        cells_left = [c for c in cells_left if c.label not in done and c.label not in failed]
        evaluations = [(c, e) for c, e in evaluations if _evaluation_label(c, e) not in done.union(failed)]
        for cell in cells_left:
            if cell.label not in scheduler.in_flight and scheduler.has_room() and _ready(cell, every_cell):
                _start_cell(scheduler, cell, every_cell)
        for cell, evaluation in evaluations:
            if _evaluation_label(cell, evaluation) not in scheduler.in_flight and scheduler.has_room():
                _start_evaluation(scheduler, cell, evaluation)
        if not scheduler.in_flight and not evaluations and all(not _ready(c, every_cell) for c in cells_left):
            break
        time.sleep(cfg.slurm.poll_s)
    _finish(done, earlier, failed, [c.label for c in cells_left])
