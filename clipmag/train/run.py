"""The one run driver of both trainers: set up, train, test what ships, write ``results.json``.

A front end supplies a ``RunTask`` (the contract's ``Task`` plus how to load and test its export)
and a factory that builds it from the resolved config; everything else - distributed set-up,
logging, the training loop, the test phase, the results record and cleanup - happens here once.
"""

from __future__ import annotations

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
from clipmag.scoring.head_record import HeadRecord
from clipmag.storage.folder_lock import FolderLock
from clipmag.train.contract import Task
from clipmag.train.engine import Trainer
from clipmag.train.loop_config import TrainLoopConfig
from clipmag.train.optimizer import OptimConfig

EXPORT_DIR = "export"


class RunConfig(Protocol):
    """What the driver reads of a front end's config (both have these sections)."""

    optim: OptimConfig
    train: TrainLoopConfig


class RunTask(Task, Protocol):
    """The engine's task plus the test phase."""

    def load_export(self, directory: Path) -> nn.Module:
        """The exported model as a user would load it (tested instead of the in-memory one)."""

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
    ctx = dist_utils.init_distributed(cfg.train.device)
    output_dir = Path(cfg.train.output_dir)
    lock = FolderLock(output_dir, "training run")
    try:
        if ctx.is_main:  # before any rank writes: a second run into this folder stops here
            lock.acquire()
        setup_logging(output_dir, ctx.rank, hold=True)  # out.log waits until the folder is this run's
        task = make_task(cfg, ctx)
        start = time.perf_counter()
        trainer = Trainer(task, cfg.train, cfg.optim, cfg, ctx)
        trainer.prepare()
        release_held_log()
        validation = trainer.fit()
        train_seconds = time.perf_counter() - start
        if not ctx.is_main:
            return {}
        if cfg.train.export_final:  # test what ships, with the record that ships
            tested = output_dir / EXPORT_DIR
            model, record = task.load_export(tested).to(ctx.device), HeadRecord.read(tested)
        else:  # the trainer's model holds the selected weights
            tested = Path(trainer.tested["path"])
            model = trainer.tested_model.to(ctx.device)
            record = model.head_record()
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
    finally:
        lock.release()
        dist_utils.cleanup()
