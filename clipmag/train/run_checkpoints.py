"""What a training run saves and restores: the trainer state, whole or sharded checkpoints, the
claim on the run folder, resume, the best checkpoint and the choice of the weights that are tested.

Mixed into :class:`clipmag.train.engine.Trainer`, whose ``__init__`` sets the attributes annotated
below; kept apart from the loop because this is where a run meets its folder: nothing is written
there before it is known to be this run's (``clipmag.train.run_folder``) and a checkpoint to resume
must match this run (``clipmag.train.checkpoint.resume_check``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from clipmag.config.build import config_yaml, to_dict
from clipmag.runtime import distributed as dist_utils
from clipmag.runtime.distributed import DistributedContext
from clipmag.runtime.logs import MetricsWriter, logger
from clipmag.storage.files import write_text_atomic
from clipmag.storage.finite import NonFiniteWeights, first_non_finite
from clipmag.train import dropout, sharding
from clipmag.train.checkpoint import BEST, LATEST
from clipmag.train.checkpoint import files as ckpt_io
from clipmag.train.checkpoint.data_fingerprint import FINGERPRINT_KEY, check_same_data
from clipmag.train.checkpoint.resume_check import ResumeMismatch, check_resumable
from clipmag.train.checkpoint.schema import FORMAT, FORMAT_KEY, check_checkpoint_schema
from clipmag.train.contract import Task
from clipmag.train.diverged_record import clear_divergence
from clipmag.train.loop_config import TrainLoopConfig
from clipmag.train.run_folder import plan_run_folder
from clipmag.train.train_step import TrainStep

__all__ = ["RunCheckpoints", "carried_seconds"]


def carried_seconds(ckpt: Mapping[str, Any], output_dir: Path) -> float | None:
    """The training seconds that ``output_dir`` spent before ``ckpt``'s step, so a resumed run's time
    counts every attempt: the checkpoint's own record when this folder wrote it; 0 when another folder
    did (a sweep cell continuing another cell's run counts only the steps it adds, as its cost plan
    does; a run folder moved between attempts counts from the move); ``None`` when the checkpoint
    predates the record (the earlier attempts' time is unknown)."""
    record = ckpt.get("folder_seconds")
    if record is None:
        return None
    if record.get("folder") != str(output_dir.resolve()):
        return 0.0
    return float(record["seconds"])


class RunCheckpoints:
    """Checkpoints, resume and the tested weights of one run (the ``Trainer``'s attributes below)."""

    task: Task
    loop: TrainLoopConfig
    full_config: Any
    ctx: DistributedContext
    output_dir: Path
    ckpt_dir: Path
    model: nn.Module
    whole: nn.Module | None
    sharded: bool
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    train_step: TrainStep
    identity: dict[str, Any]
    data_fingerprint: str | None  # of data.train, kept in every checkpoint (data_fingerprint.py)
    step: int
    samples_seen: int
    best: float | None
    dev_curve: list[dict[str, float]]  # the primary validation metric at every evaluated step
    attempt_started: float  # time.perf_counter() when this attempt began
    earlier_seconds: float | None  # this folder's training seconds before this attempt (None: unknown)
    writer: MetricsWriter | None
    prepared: bool

    @property
    def tested_model(self) -> nn.Module:
        """The model that is validated, tested and exported (rank 0)."""
        return self.whole if self.whole is not None else self.model

    @property
    def train_seconds(self) -> float:
        """This folder's training seconds so far: the earlier attempts up to the checkpoint this one
        resumed from (when known) and this attempt (building, restoring, training, validating)."""
        return (self.earlier_seconds or 0.0) + time.perf_counter() - self.attempt_started

    def trainer_state(self, rng: list[dict[str, Any]]) -> dict[str, Any]:
        """Everything a resumed run needs but the weights and the optimizer's moments (which a
        sharded checkpoint stores in shards beside it); ``rng``: every rank's RNG state, in rank order.
        The folder's training time is left out once it is unknown, so no later attempt mistakes a
        part for the whole."""
        timed: dict[str, Any] = {}
        if self.earlier_seconds is not None:
            timed["folder_seconds"] = {"folder": str(self.output_dir.resolve()), "seconds": self.train_seconds}
        return {
            FORMAT_KEY: FORMAT,
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
            "dev_curve": self.dev_curve,
            **({FINGERPRINT_KEY: self.data_fingerprint} if self.data_fingerprint else {}),
            **timed,
        }

    def state(self, rng: list[dict[str, Any]]) -> dict[str, Any]:
        """A whole checkpoint (one file): the trainer state, the weights and the optimizer."""
        return {
            **self.trainer_state(rng),
            "state_dict": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
        }

    def save(self) -> None:
        self.require_finite_weights()
        rng = dist_utils.all_gather_objects(ckpt_io.rng_state())
        if self.sharded:
            sharding.save_sharded(self.ckpt_dir, self.step, self.model, self.optimizer, self.trainer_state(rng))
            return
        if self.ctx.is_main:
            ckpt_io.atomic_save(self.state(rng), self.ckpt_dir / LATEST)
        dist_utils.barrier()

    def require_finite_weights(self) -> None:
        """Stop, on every rank at once, a run whose weights or head record (a learned scale) hold inf or
        nan before they are validated, saved or exported (each rank checks its own shards under FSDP);
        the message names the step, the tensor and the checkpoint that remains."""
        weights = {**self.model.state_dict(), "head record": self.model.head_record().to_dict()}
        found = [name for name in dist_utils.all_gather_objects(first_non_finite(weights)) if name]
        if found:
            raise NonFiniteWeights(
                f"step {self.step}: weight '{found[0]}' holds inf or nan, so no checkpoint or export is written; "
                f"{ckpt_io.what_remains(self.output_dir, read_step=self.ctx.is_main)}. "
                "Try a lower learning rate, a smaller scale, or a normalised head"
            )

    def prepare(self, checkpoint: dict[str, Any] | None = None) -> None:
        """Claim the run folder: check it and the checkpoint to resume (every rank, before anything
        is written), clear what the plan says (rank 0), write ``config.yaml``, open the metrics and
        restore the checkpoint. ``fit()`` calls it; a caller may call it first to know that the
        folder was accepted, passing the checkpoint of ``train.resume`` when it has read it already
        (a checkpoint with its optimizer state is large: it is read once)."""
        if self.prepared:
            return
        resume_path = ckpt_io.resolve_resume(self.loop.resume, self.output_dir)
        plan = plan_run_folder(self.loop, resume_path)
        ckpt = None
        if resume_path is not None:
            ckpt = checkpoint if checkpoint is not None else ckpt_io.load_checkpoint(resume_path)
        if ckpt is not None:
            check_checkpoint_schema(ckpt, resume_path)  # a missing key is named before anything is rewritten
            check_resumable(ckpt, resume_path, self.identity, self.model.state_dict(), type(self.full_config))
            train = to_dict(self.full_config).get("data", {}).get("train")
            check_same_data(ckpt, resume_path, self.data_fingerprint, train, self.loop.resume_other_data)
            if self.sharded and not ckpt.get("sharded"):
                raise ResumeMismatch(
                    f"cannot resume from {resume_path} with train.strategy=fsdp: it is a whole checkpoint of a "
                    "train.strategy=ddp run; resume it with ddp, or start an fsdp run from its export "
                    "(--model <run>/export)"
                )
        dist_utils.barrier()  # every rank has read the folder before rank 0 changes it
        if self.ctx.is_main:
            plan.apply()
            clear_divergence(self.output_dir)
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
        ckpt_io.restore_rng_state(dropout.resumed_rng_state(ckpt["rng"], self.ctx, self.model))
        self.step, self.samples_seen, self.best = ckpt["step"], ckpt["samples_seen"], ckpt.get("best")
        self.dev_curve = list(ckpt.get("dev_curve", []))
        self.earlier_seconds = carried_seconds(ckpt, self.output_dir)
        if self.writer is not None:
            self.writer.truncate_after(self.step)
        logger.info("resumed from %s at step %d (%d samples seen)", path, self.step, self.samples_seen)

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
        return self.ckpt_dir / LATEST

    def _select_tested(self) -> dict[str, Any]:
        """The best checkpoint by the primary metric when validation ran, else the final model.

        The chosen weights are loaded into the tested model, so the export is the model that is tested.
        """
        best = self.ckpt_dir / BEST
        if self.best is None or not best.is_file():
            reason = "no validation metric was recorded"
            return {"selection": "final", "path": str(self._latest_path()), "step": self.step, "reason": reason}
        ckpt = ckpt_io.load_checkpoint(best)
        self.tested_model.load_state_dict(ckpt["state_dict"])
        logger.info("testing the best checkpoint: step %d, %s %.4f", ckpt["step"], self.task.primary_metric, self.best)
        metric = self.task.primary_metric
        every = f"every {self.loop.eval_every} steps and " if self.loop.eval_every else ""
        rule = (
            f"the checkpoint with the highest validation {metric} of those evaluated ({every}at the end; a tie keeps "
            "the earlier), its weights tested"
        )
        return {
            "selection": "best",
            "path": str(best),
            "step": ckpt["step"],
            "metric": metric,
            "value": self.best,
            "rule": rule,
            "dev_curve": self.dev_curve,
        }
