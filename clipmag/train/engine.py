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
(``clipmag.train.resume_check``); only then are ``config.yaml`` and the metrics written.
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

from clipmag.config.build import config_yaml, to_dict
from clipmag.runtime import distributed as dist_utils
from clipmag.runtime.distributed import DistributedContext
from clipmag.runtime.logs import MetricsWriter, logger
from clipmag.runtime.precision import autocast_dtype
from clipmag.scoring.heads import SimilarityHead
from clipmag.storage.files import write_text_atomic
from clipmag.train import checkpoint as ckpt_io
from clipmag.train import sharding
from clipmag.train.contract import Task, checked_model
from clipmag.train.loop_config import TrainLoopConfig
from clipmag.train.optimizer import OptimConfig, build_optimizer, build_scheduler
from clipmag.train.resume_check import ResumeMismatch, check_resumable, step_identity
from clipmag.train.run_folder import plan_run_folder
from clipmag.train.stop_signals import RunStopped, StopRequests
from clipmag.train.train_step import TrainStep


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


class Trainer:
    """One training run. ``fit()`` trains, validates, checkpoints and exports."""

    def __init__(
        self, task: Task, loop: TrainLoopConfig, optim: OptimConfig, full_config: Any, ctx: DistributedContext
    ) -> None:
        self.task, self.loop, self.optim_cfg, self.full_config, self.ctx = task, loop, optim, full_config, ctx
        self.output_dir = Path(loop.output_dir)
        self.ckpt_dir = self.output_dir / ckpt_io.CHECKPOINT_DIR
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
        seed_everything(loop.seed + ctx.rank)  # open_clip's rule: per-rank dropout and augmentation
        self.head: SimilarityHead = self.model.head
        self.optimizer = build_optimizer(self.model, optim)
        self.scheduler = build_scheduler(self.optimizer, optim, loop.steps)
        self.train_step = TrainStep(
            self.model, self.optimizer, self.scheduler, loop, optim, ctx, amp_dtype, self.ckpt_dir
        )
        self.step, self.samples_seen = 0, 0
        self.best: float | None = None
        self.tested: dict[str, Any] = {}
        self.identity = step_identity(
            to_dict(full_config),
            task.local_batch_size() * ctx.world_size,
            self.train_step.amp_dtype,
            task.run_identity(),
        )
        self.writer: MetricsWriter | None = None  # opened by prepare(), once the folder is this run's
        self.prepared = False

    # ---- checkpoints -------------------------------------------------------------------------
    @property
    def tested_model(self) -> nn.Module:
        """The model that is validated, tested and exported (rank 0)."""
        return self.whole if self.whole is not None else self.model

    def trainer_state(self, rng: list[dict[str, Any]]) -> dict[str, Any]:
        """Everything a resumed run needs but the weights and the optimizer's moments (which a
        sharded checkpoint stores in shards beside it); ``rng``: every rank's RNG state, in rank order."""
        return {
            "epoch": self.step,  # open_clip's key; we count optimizer steps
            "step": self.step,
            "samples_seen": self.samples_seen,
            "name": self.output_dir.name,
            "scheduler": self.scheduler.state_dict(),
            "scaler": self.train_step.scaler.state_dict(),
            "head": self.model.head_record().to_dict(),
            "config": to_dict(self.full_config),
            "identity": self.identity,
            "rng": rng,
            "best": self.best,
        }

    def state(self, rng: list[dict[str, Any]]) -> dict[str, Any]:
        """A whole checkpoint (one file): the trainer state, the weights and the optimizer."""
        return {
            **self.trainer_state(rng),
            "state_dict": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
        }

    def save(self) -> None:
        rng = dist_utils.all_gather_objects(ckpt_io.rng_state())
        if self.sharded:
            sharding.save_sharded(self.ckpt_dir, self.step, self.model, self.optimizer, self.trainer_state(rng))
            return
        if self.ctx.is_main:
            ckpt_io.atomic_save(self.state(rng), self.ckpt_dir / ckpt_io.LATEST)
        dist_utils.barrier()

    def prepare(self) -> None:
        """Claim the run folder: check it and the checkpoint to resume (every rank, before anything
        is written), clear what the plan says (rank 0), write ``config.yaml``, open the metrics and
        restore the checkpoint. ``fit()`` calls it; a caller may call it first to know that the
        folder was accepted."""
        if self.prepared:
            return
        resume_path = ckpt_io.resolve_resume(self.loop.resume, self.output_dir)
        plan = plan_run_folder(self.loop, resume_path)
        ckpt = ckpt_io.load_checkpoint(resume_path) if resume_path is not None else None
        if ckpt is not None:
            check_resumable(ckpt, resume_path, self.identity, self.model.state_dict())
            if self.sharded and not ckpt.get("sharded"):
                raise ResumeMismatch(
                    f"cannot resume from {resume_path} with train.strategy=fsdp: it is a whole checkpoint of a "
                    "train.strategy=ddp run; resume it with ddp, or start an fsdp run from its export "
                    "(--model <run>/export)"
                )
        dist_utils.barrier()  # every rank has read the folder before rank 0 changes it
        if self.ctx.is_main:
            plan.apply()
            write_text_atomic(self.output_dir / "config.yaml", config_yaml(self.full_config))
            self.writer = MetricsWriter(self.output_dir, self.loop.tensorboard)
        if ckpt is not None:
            self.restore(ckpt, resume_path)
        self.prepared = True

    def restore(self, ckpt: dict[str, Any], path: Path) -> None:
        if ckpt.get("sharded"):  # resharded to this run's ranks (or made whole under ddp)
            sharding.load_sharded(path, self.model, self.optimizer)
        else:
            self.model.load_state_dict(ckpt["state_dict"])
            self.optimizer.load_state_dict(ckpt["optimizer"])
        self.scheduler.load_state_dict(ckpt["scheduler"])
        self.train_step.scaler.load_state_dict(ckpt["scaler"])
        ckpt_io.restore_rng_state(ckpt_io.rank_rng_state(ckpt["rng"], self.ctx.rank, self.ctx.world_size))
        self.step, self.samples_seen, self.best = ckpt["step"], ckpt["samples_seen"], ckpt.get("best")
        if self.writer is not None:
            self.writer.truncate_after(self.step)
        logger.info("resumed from %s at step %d (%d samples seen)", path, self.step, self.samples_seen)

    # ---- validation --------------------------------------------------------------------------
    def _gather_whole(self) -> None:
        """Under FSDP, put the trained weights into rank 0's whole copy (every rank takes part)."""
        if self.sharded:
            state = sharding.full_model_state(self.model)
            if self.whole is not None:
                self.whole.load_state_dict(state)

    def validate(self) -> dict[str, float]:
        metrics: dict[str, float] = {}
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
            logger.info(
                "step %d eval: %s",
                self.step,
                ", ".join(f"{k} {v:.4f}" for k, v in metrics.items() if isinstance(v, float)),
            )
        dist_utils.barrier()
        return metrics

    def _maybe_keep_best(self, metrics: dict[str, float]) -> None:
        key = self.task.primary_metric
        if not (self.loop.keep_best and key and key in metrics):
            return
        if self.best is None or metrics[key] > self.best:
            self.best = metrics[key]
            if self.ctx.is_main:  # for testing, not resuming: rank 0's RNG state is enough
                ckpt_io.atomic_save(self._best_state(), self.ckpt_dir / ckpt_io.BEST)
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
                logger.warning("%s at step %d: checkpoint saved; train.resume=latest continues", signal_name, self.step)
                raise RunStopped(self.step, signal_name)
        bar.close()

    def _best_state(self) -> dict[str, Any]:
        """The best checkpoint: whole, for testing; under FSDP without the optimizer (a run resumes
        from its latest sharded checkpoint, never from the best)."""
        rng = [ckpt_io.rng_state()]
        if not self.sharded:
            return self.state(rng)
        return {**self.trainer_state(rng), "state_dict": self.tested_model.state_dict()}

    def _latest_path(self) -> Path | None:
        if self.sharded:
            return sharding.latest_sharded(self.ckpt_dir)
        return self.ckpt_dir / ckpt_io.LATEST

    def _select_tested(self) -> dict[str, Any]:
        """The best checkpoint by the primary metric when validation ran, else the final model.

        The chosen weights are loaded into the tested model, so the export is the model that is tested.
        """
        best = self.ckpt_dir / ckpt_io.BEST
        if self.best is None or not best.is_file():
            reason = "no validation metric was recorded"
            return {"selection": "final", "path": str(self._latest_path()), "step": self.step, "reason": reason}
        ckpt = ckpt_io.load_checkpoint(best)
        self.tested_model.load_state_dict(ckpt["state_dict"])
        logger.info("testing the best checkpoint: step %d, %s %.4f", ckpt["step"], self.task.primary_metric, self.best)
        metric = self.task.primary_metric
        return {"selection": "best", "path": str(best), "step": ckpt["step"], "metric": metric, "value": self.best}

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
