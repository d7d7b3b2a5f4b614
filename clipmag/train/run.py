"""The one run driver of both trainers: set up, train, test what ships, write ``results.json``.

A front end supplies a ``RunTask`` (the contract's ``Task`` plus how to load and test its export)
and a factory that builds it from the resolved config; everything else - distributed set-up,
logging, the training loop, the test phase, the results record and cleanup - happens here once.
A full disk or a lost rank, wherever it strikes, ends the run in one line that says which
checkpoint remains.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import nn

from clipmag.config.build import to_dict
from clipmag.results.record import build_results, numerics, write_results
from clipmag.runtime import distributed as dist_utils
from clipmag.runtime.distributed import DistributedContext
from clipmag.runtime.logs import logger, release_held_log, setup_logging
from clipmag.runtime.lost_rank import LostRank, is_lost_rank
from clipmag.scoring.head_record import HeadRecord
from clipmag.storage.disk_full import DiskFull, is_disk_full
from clipmag.storage.folder_lock import FolderLock
from clipmag.train.checkpoint import files as ckpt_io
from clipmag.train.checkpoint.resume_check import resumed_loop
from clipmag.train.contract import Task
from clipmag.train.engine import Trainer
from clipmag.train.loop_config import TrainLoopConfig
from clipmag.train.optim_config import OptimConfig
from clipmag.train.train_step import TrainingDiverged

EXPORT_DIR = "export"


class RunConfig(Protocol):
    """What the driver reads of a front end's config (both have these sections)."""

    optim: OptimConfig
    train: TrainLoopConfig


class RunTask(Task, Protocol):
    """The engine's task plus the test phase."""

    def load_export(self, directory: Path) -> nn.Module:
        """The exported model as a user would load it (tested instead of the in-memory one)."""

    def exported_part(self, model: nn.Module) -> nn.Module:
        """What an export of the trainer's ``model`` holds (the text trainer's encoder, without the
        loss around it): the model tested when ``train.export_final`` is off."""

    def test(self, model: nn.Module) -> dict[str, dict[str, Any]]:
        """Metrics per test dataset (rank 0, eval mode, no grad)."""

    def format_results(self, metrics: dict[str, dict[str, Any]]) -> str:
        """A short human-readable table of the test metrics."""

    def describe_export(self, export: Path, record: HeadRecord, results: dict[str, Any]) -> None:
        """Complete the export's documentation with the tested record and the results (a model card
        with the test metrics, which were unknown when the export was saved); nothing if the format
        has none."""


def run_training(cfg: RunConfig, make_task: Callable[[Any, DistributedContext], RunTask]) -> dict[str, Any]:
    """Train ``cfg`` (one process or under torchrun), test the export on rank 0, write results.

    Returns the results record on rank 0 and an empty dict on the other ranks.
    """
    ctx = dist_utils.init_distributed(cfg.train.device, cfg.train.collective_timeout_s / 60, key="train.device")
    output_dir = Path(cfg.train.output_dir)
    lock = FolderLock(output_dir, "training run")
    trainer: Trainer | None = None
    began = False  # until a step has run, a refusal leaves the folder as it found it
    try:
        if ctx.is_main:  # before any rank writes: a second run into this folder stops here
            lock.acquire()
        setup_logging(output_dir, ctx.rank, hold=True)  # out.log waits until the folder is this run's
        loop, checkpoint = resumed_loop(cfg.train)  # an old run resumes as it ran
        cfg = dataclasses.replace(cfg, train=loop)
        task = make_task(cfg, ctx)
        trainer = Trainer(task, cfg.train, cfg.optim, cfg, ctx)
        trainer.prepare(checkpoint)
        del checkpoint  # restored into the model and optimizer: free its copy
        release_held_log()
        validation = trainer.fit()
        began = True
        train_seconds = trainer.train_seconds
        if not ctx.is_main:
            return {}
        if cfg.train.export_final:  # test what ships, with the record that ships
            tested = output_dir / EXPORT_DIR
            model, record = task.load_export(tested).to(ctx.device), HeadRecord.read(tested)
        else:  # the trainer's model holds the selected weights, tested as its export would be
            tested = Path(trainer.tested["path"])
            record = trainer.tested_model.head_record()
            model = task.exported_part(trainer.tested_model).to(ctx.device)
        model.eval()
        start = time.perf_counter()
        with torch.no_grad():
            metrics = task.test(model)
        run = {
            "front_end": task.front_end,
            "output_dir": str(output_dir),
            **task.run_identity(),
            "seed": cfg.train.seed,
            "steps": cfg.train.steps,
            "world_size": ctx.world_size,
        }
        timings = {"train_seconds": train_seconds, "test_seconds": time.perf_counter() - start}
        if trainer.earlier_seconds is None:  # resumed from a checkpoint without the earlier attempts' time
            timings["train_seconds_partial"] = True
        checkpoint = {**trainer.tested, "path": str(tested)}
        results = build_results(
            run,
            record,
            checkpoint,
            metrics,
            validation,
            timings,
            numerics(trainer.train_step.amp_dtype),
            config=to_dict(cfg),
        )
        write_results(results, output_dir)
        logger.info("results written to %s", output_dir / "results.json")
        if cfg.train.export_final:
            task.describe_export(tested, record, results)
        print(task.format_results(metrics), flush=True)
        return results
    except Exception as err:
        began = began or isinstance(err, TrainingDiverged)  # a step ran: its record is the run's outcome
        fault = _run_fault(err, output_dir, ctx, cfg.train.collective_timeout_s)
        if fault is None:
            raise
        raise fault from None
    finally:
        if began or (trainer is not None and trainer.step > 0):  # a step ran, now or before a resume
            lock.release()
        else:  # a missing shard, a batch larger than the data: what the run wrote goes, lock and all
            lock.abandon(restore=True)
        dist_utils.cleanup()


def _run_fault(err: Exception, output_dir: Path, ctx: DistributedContext, timeout_s: float) -> Exception | None:
    """A full disk (a checkpoint, the export, the results) or a lost rank as the one line the entry
    point prints, with the checkpoint that remains; None for any other error."""
    if is_disk_full(err):
        return DiskFull(err.folder if isinstance(err, DiskFull) else output_dir, ckpt_io.after_full_disk(output_dir))
    if is_lost_rank(err):
        remains = f"{ckpt_io.what_remains(output_dir, read_step=ctx.is_main)}: {ckpt_io.RERUN} once every rank runs"
        return LostRank(err, ctx.rank, ctx.world_size, timeout_s, remains)
    return None
