"""What a training run costs, counted rather than estimated: the parameters of its model and the
FLOPs of one optimizer step, by torch's ``FlopCounterMode`` over a forward and backward of the run's
own model on a batch of its shape, the model built on the ``meta`` device (no weights read or held,
so a 7B encoder is counted on a laptop). Each front end counts its runs with :func:`count_step`
(its module's ``cell_cost``); ``clipmag-sweep plan`` turns the counts into GPU-hours and memory.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from clipmag.runtime.devices import Device
from clipmag.train.loop_config import TrainLoopConfig

__all__ = ["BYTES_PER_PARAMETER", "CellCost", "count_step", "extra_forwards"]


# fp32 weights, their gradients and AdamW's two moments (bf16 autocast keeps fp32 master weights)
BYTES_PER_PARAMETER = 16


@dataclass(frozen=True)
class CellCost:
    """One cell's count: ``flops_per_step`` is the forward and backward of one optimizer step's
    global batch (every rank's micro-batches)."""

    steps: int
    global_batch: int
    parameters: int
    flops_per_step: float

    def gpu_hours(self, device: Device, utilisation: float) -> float:
        return self.steps * self.flops_per_step / (device.dense_bf16_tflops * 1e12 * utilisation) / 3600


def extra_forwards(loop: TrainLoopConfig) -> int:
    """The forward passes a step of ``loop`` repeats: one for gradient caching (every chunk is embedded
    once without a graph first), one for activation checkpointing (the backward recomputes it)."""
    return int(bool(loop.chunk_size)) + int(loop.gradient_checkpointing)


def count_step(
    build: Callable[[], nn.Module], step: Callable[[nn.Module], torch.Tensor], extra_forwards: int = 0
) -> tuple[int, float]:
    """(parameters, FLOPs) of ``step(model)`` and its backward, the model built on the meta device.

    ``extra_forwards``: forward passes a real step repeats (:func:`extra_forwards`), each counted at
    the forward's FLOPs."""
    with torch.device("meta"):
        model = build()
    with FlopCounterMode(display=False) as forward:
        total = step(model)
    with FlopCounterMode(display=False) as backward:
        total.backward()
    flops = (1 + extra_forwards) * forward.get_total_flops() + backward.get_total_flops()
    return sum(p.numel() for p in model.parameters()), float(flops)
