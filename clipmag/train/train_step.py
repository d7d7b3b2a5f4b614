"""One optimizer step of the generic loop: micro-batches, autocast, gradient caching, guards.

Kept apart from the loop (``engine.py``) because this is where the numerics live: how a global
batch is split (``grad_accum`` micro-batches, each optionally in ``chunk_size`` pieces with cached
gradients), how gradients are synchronised across ranks, and what counts as divergence. Nothing
non-finite ever reaches the optimizer: a non-finite loss, norm statistic or gradient norm stops
the run before ``optimizer.step`` (with fp16 loss scaling, inf gradients are the scaler's to skip).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from clipmag.errors import UserError
from clipmag.runtime import distributed as dist_utils
from clipmag.train import sharding
from clipmag.train.checkpoint.files import what_remains
from clipmag.train.diverged_record import record_divergence
from clipmag.train.grad_cache import cached_backward
from clipmag.train.loop_config import TrainLoopConfig
from clipmag.train.optim_config import OptimConfig


class TrainingDiverged(UserError, RuntimeError):
    """Raised before a checkpoint could store a blown-up model (its message says which guard fired)."""


def _scalar(value: Any) -> float:
    return float(value.detach().float().mean()) if isinstance(value, torch.Tensor) else float(value)


class TrainStep:
    """Runs optimizer steps for ``model`` (wrapped in DDP unless gradients are cached or it is sharded)."""

    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        scheduler: torch.optim.lr_scheduler.LRScheduler,
        loop: TrainLoopConfig,
        optim: OptimConfig,
        ctx: dist_utils.DistributedContext,
        amp_dtype: torch.dtype | None,
        checkpoints: Path,
    ) -> None:
        self.model, self.optimizer, self.scheduler = model, optimizer, scheduler
        self.loop, self.optim, self.ctx, self.amp_dtype, self.checkpoints = loop, optim, ctx, amp_dtype, checkpoints
        self.scaler = torch.amp.GradScaler(ctx.device.type, enabled=amp_dtype is torch.float16)
        # Cached-gradient steps call the model's parts directly, which DDP's hooks do not see; their
        # gradients are averaged by hand after the backward passes, exactly as DDP would. Under FSDP
        # the shards are reduced by FSDP and only the replicated rest by hand.
        self.sharded = loop.strategy == "fsdp"
        use_ddp = ctx.is_distributed and not loop.chunk_size and not self.sharded
        device_ids = [ctx.device.index] if ctx.device.type == "cuda" else None
        self.ddp = DistributedDataParallel(model, device_ids=device_ids) if use_ddp else None
        self.averaged_by_hand: list[nn.Parameter] = []
        if self.sharded:
            self.averaged_by_hand = sharding.replicated_parameters(model)
        elif loop.chunk_size:
            self.averaged_by_hand = list(model.parameters())

    def autocast(self) -> contextlib.AbstractContextManager:
        dtype = self.amp_dtype or torch.float32
        return torch.autocast(self.ctx.device.type, dtype=dtype, enabled=self.amp_dtype is not None)

    def _micro_batch(self, batch: Any, micro: int) -> dict[str, Any]:
        accum = self.loop.grad_accum

        def backward(loss: torch.Tensor) -> None:
            self.scaler.scale(loss / accum).backward()

        if self.loop.chunk_size:
            return cached_backward(self.model, batch, self.loop.chunk_size, backward, self.ctx.device, self.autocast)
        sync = micro == accum - 1
        if self.sharded:
            sharding.set_gradient_sync(self.model, sync)
        with contextlib.nullcontext() if sync or self.ddp is None else self.ddp.no_sync():
            with self.autocast():
                out = (self.ddp or self.model)(batch)
            backward(out["loss"])
        return out

    def __call__(self, batches: Iterator[Any], step: int) -> dict[str, float]:
        """Accumulate ``grad_accum`` micro-batches, check, clip and apply; return mean statistics."""
        accum = self.loop.grad_accum
        sums: dict[str, float] = {}
        for micro in range(accum):
            out = self._micro_batch(next(batches), micro)
            for key, value in out.items():
                sums[key] = sums.get(key, 0.0) + _scalar(value) / accum
        dist_utils.average_gradients(self.averaged_by_hand)
        self.scaler.unscale_(self.optimizer)
        max_norm = self.optim.clip_grad_norm or math.inf
        if self.sharded:
            sums["grad_norm"] = sharding.clip_grad_norm_(self.model.parameters(), max_norm)
        else:
            sums["grad_norm"] = float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm))
        self.guard(sums, step)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        self.scheduler.step()
        self.model.loss.clamp_scale_()  # open_clip's rule: clamp the logit scale after the step
        return sums

    def guard(self, stats: dict[str, float], step: int) -> None:
        """Stop a run whose loss, norms or gradients blew up, on every rank at once, before the step."""
        limits = {"loss": self.loop.max_loss, "q_norm_mean": self.loop.max_norm, "d_norm_mean": self.loop.max_norm}
        if not self.scaler.is_enabled():
            limits["grad_norm"] = math.inf
        keys = [k for k in limits if k in stats]
        values = dist_utils.all_reduce_mean(
            torch.tensor([stats[k] for k in keys], dtype=torch.float64, device=self.ctx.device)
        )
        for key, value in zip(keys, values.tolist()):
            if not math.isfinite(value) or value > limits[key]:
                message = (
                    f"training diverged at step {step + 1}: {key} = {value:.4g} (limit {limits[key]:.4g}); "
                    f"the weights were not updated and {what_remains(self.checkpoints.parent, self.ctx.is_main)}. "
                    f"Try a lower learning rate, a smaller scale, or a normalised head."
                )
                if self.ctx.is_main:
                    record_divergence(self.checkpoints.parent, step + 1, key, value, limits[key], message)
                raise TrainingDiverged(message)
