"""The generic training loop shared by the text and the image-text trainers.

The loop owns everything that is not specific to a modality: seeding, DDP, AdamW groups and the
schedule, gradient accumulation, autocast, clipping, the divergence guard, logging, validation,
atomic checkpoints and exact resume, and the final export. A front end supplies a small ``Task``
whose model the loop checks once against the written contract (:mod:`clipmag.train.contract`).

Exact resume: the model, optimizer, scheduler, scaler and RNG states are saved at a step
boundary, and the task's batch stream is a deterministic function of the micro-batch index, so
a run killed and resumed from ``latest`` repeats the uninterrupted run step for step.

Nothing is written into the run folder before it is known to be this run's: the folder must not
hold another run (``clipmag.train.run_folder``) and a checkpoint to resume must match this run
(``clipmag.train.checkpoint.resume_check``); only then are ``config.yaml`` and the metrics written.
"""

from __future__ import annotations

import copy
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from clipmag.config.build import to_dict
from clipmag.runtime import distributed as dist_utils
from clipmag.runtime.distributed import DistributedContext
from clipmag.runtime.logs import MetricsWriter, logger
from clipmag.runtime.precision import autocast_dtype
from clipmag.scoring.heads import SimilarityHead
from clipmag.train import sharding
from clipmag.train.checkpoint import BEST, CHECKPOINT_DIR
from clipmag.train.checkpoint import files as ckpt_io
from clipmag.train.checkpoint.data_fingerprint import training_data_fingerprint
from clipmag.train.checkpoint.resume_check import step_identity
from clipmag.train.contract import Task, checked_model
from clipmag.train.loop_config import TrainLoopConfig
from clipmag.train.optim_config import OptimConfig
from clipmag.train.optimizer import build_optimizer, build_scheduler
from clipmag.train.run_checkpoints import RunCheckpoints
from clipmag.train.stop_signals import StopRequests
from clipmag.train.train_step import TrainStep


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


class Trainer(RunCheckpoints):
    """One training run. ``fit()`` trains, validates, checkpoints and exports (what a run saves and
    restores, and which weights it tests, is :class:`clipmag.train.run_checkpoints.RunCheckpoints`)."""

    def __init__(
        self, task: Task, loop: TrainLoopConfig, optim: OptimConfig, full_config: Any, ctx: DistributedContext
    ) -> None:
        self.attempt_started, self.earlier_seconds = time.perf_counter(), 0.0  # a resume sets the earlier part
        self.task, self.loop, self.optim_cfg, self.full_config, self.ctx = task, loop, optim, full_config, ctx
        self.output_dir = Path(loop.output_dir)
        self.ckpt_dir = self.output_dir / CHECKPOINT_DIR
        if loop.threads:
            torch.set_num_threads(loop.threads)
        seed_everything(loop.seed)  # identical initial weights on every rank
        model = checked_model(task.build_model(), task.front_end)
        amp_dtype = autocast_dtype(loop.precision, ctx.device)
        self.sharded = loop.strategy == "fsdp"
        # What is validated, tested and exported: the model itself, or under FSDP a whole copy on
        # rank 0 (on the CPU between uses) that takes the gathered weights.
        self.whole: nn.Module | None = None
        if self.sharded and ctx.is_main:
            self.whole = copy.deepcopy(model).cpu()
        self.model = model.to(ctx.device)
        if self.sharded:
            dist_utils.init_single_process_group(ctx.device)
            sharding.shard_model(self.model, amp_dtype)
        seed_everything((loop.seed + ctx.rank) % 2**32)  # open_clip's rule: per-rank dropout and augmentation
        self.head: SimilarityHead = self.model.head
        self.optimizer = build_optimizer(self.model, optim)
        self.scheduler = build_scheduler(self.optimizer, optim, loop.steps)
        self.train_step = TrainStep(
            self.model, self.optimizer, self.scheduler, loop, optim, ctx, amp_dtype, self.ckpt_dir
        )
        self.step, self.samples_seen = 0, 0
        self.best: float | None = None
        self.dev_curve: list[dict[str, float]] = []
        self.tested: dict[str, Any] = {}
        self.identity = step_identity(
            to_dict(full_config),
            task.local_batch_size() * ctx.world_size,
            self.train_step.amp_dtype,
            task.run_identity(),
        )
        self.data_fingerprint = training_data_fingerprint(to_dict(full_config).get("data", {}).get("train"))
        self.writer: MetricsWriter | None = None  # opened by prepare(), once the folder is this run's
        self.prepared = False

    # ---- validation --------------------------------------------------------------------------
    def _gather_whole(self) -> None:
        """Under FSDP, put the trained weights into rank 0's whole copy (every rank takes part)."""
        if self.sharded:
            state = sharding.full_model_state(self.model)
            if self.whole is not None:
                self.whole.load_state_dict(state)

    def validate(self) -> dict[str, float]:
        metrics: dict[str, float] = {}
        self.require_finite_weights()  # the best checkpoint is saved from what is validated
        self._gather_whole()
        if self.ctx.is_main:
            model = self.tested_model.to(self.ctx.device)
            model.eval()
            with torch.no_grad():
                metrics = self.task.evaluate(model)
            model.train()
            if self.whole is not None:
                self.whole.cpu()
            if self.writer is not None and metrics:
                self.writer.write(self.step, "eval", metrics)
            shown = ", ".join(f"{k} {v:.4f}" for k, v in metrics.items() if isinstance(v, float))
            if shown:  # a task without validation sets (the text trainer's default) evaluates to {}
                logger.info("step %d eval: %s", self.step, shown)
        dist_utils.barrier()
        return metrics

    def _maybe_keep_best(self, metrics: dict[str, float]) -> None:
        key = self.task.primary_metric
        if key and key in metrics:
            self.dev_curve.append({"step": self.step, key: metrics[key]})
        if not (self.loop.keep_best and key and key in metrics):
            return
        if self.best is None or metrics[key] > self.best:
            self.best = metrics[key]
            if self.ctx.is_main:  # for testing, not resuming: rank 0's RNG state is enough
                ckpt_io.atomic_save(self._best_state(), self.ckpt_dir / BEST)
                logger.info("new best %s %.4f at step %d", key, self.best, self.step)

    # ---- the loop ----------------------------------------------------------------------------
    def fit(self) -> dict[str, float]:
        self.prepare()
        batches = self.task.train_batches(self.step * self.loop.grad_accum)
        self.model.train()
        with StopRequests() as stop:
            self._train_steps(batches, stop)
        metrics = self.validate()
        self._maybe_keep_best(metrics)
        self.save()
        if self.ctx.is_main:
            self.tested = self._select_tested()
        if self.loop.export_final and self.ctx.is_main:
            self.task.export(self.tested_model, self.output_dir / "export")
        dist_utils.barrier()
        if self.writer is not None:
            self.writer.close()
        return metrics

    def _train_steps(self, batches: Iterator[Any], stop: StopRequests) -> None:
        """Optimizer steps up to ``train.steps``, logged, validated and saved as the loop asks; a stop
        signal saves the step reached and ends the run (:mod:`clipmag.train.stop_signals`)."""
        loop = self.loop
        global_batch = self.task.local_batch_size() * loop.grad_accum * self.ctx.world_size
        bar = tqdm(
            total=loop.steps,
            initial=self.step,
            desc="train",
            disable=not (loop.progress and self.ctx.is_main),
            dynamic_ncols=True,
        )
        window_start, window_samples = time.perf_counter(), 0
        while self.step < loop.steps:
            stats = self.train_step(batches, self.step)
            self.step += 1
            self.samples_seen += global_batch
            window_samples += global_batch
            bar.update(1)
            if self.step % loop.log_every == 0 or self.step == loop.steps:
                stats = self._reduce(stats)
                elapsed = time.perf_counter() - window_start
                stats.update(
                    lr=self.scheduler.get_last_lr()[0],
                    samples_seen=self.samples_seen,
                    samples_per_s=window_samples / max(elapsed, 1e-9),
                )
                window_start, window_samples = time.perf_counter(), 0
                bar.set_postfix(loss=f"{stats['loss']:.4f}", sps=f"{stats['samples_per_s']:.1f}")
                if self.writer is not None:
                    self.writer.write(self.step, "train", stats)
                logger.info(
                    "step %d/%d loss %.4f gammas (%.4f, %.4f) %.1f samples/s",
                    self.step,
                    loop.steps,
                    stats["loss"],
                    *self.head.gammas(),
                    stats["samples_per_s"],
                )
            if loop.eval_every and self.step % loop.eval_every == 0 and self.step < loop.steps:
                self._maybe_keep_best(self.validate())
            if loop.save_every and self.step % loop.save_every == 0 and self.step < loop.steps:
                self.save()
            signal_name = stop.agreed(self.ctx.device)
            if signal_name is not None and self.step < loop.steps:
                self.save()
                bar.close()
                raise stop.stopped(self.step, signal_name, self.ctx.is_main)
        bar.close()

    def _reduce(self, stats: dict[str, float]) -> dict[str, float]:
        keys = sorted(stats)
        values = dist_utils.all_reduce_mean(
            torch.tensor([stats[k] for k in keys], dtype=torch.float64, device=self.ctx.device)
        )
        return dict(zip(keys, values.tolist()))


def train(
    task: Task, loop: TrainLoopConfig, optim: OptimConfig, full_config: Any, ctx: DistributedContext
) -> dict[str, float]:
    """Train ``task`` to ``loop.steps`` (resuming when asked) and return the final validation metrics."""
    return Trainer(task, loop, optim, full_config, ctx).fit()
