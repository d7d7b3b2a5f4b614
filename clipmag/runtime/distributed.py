"""torch.distributed set-up from torchrun's environment, rank helpers, gathers with gradient.

One process without torchrun is the world of size 1: every helper then returns its input, so the
same code path serves a laptop smoke test and a multi-node run.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class DistributedContext:
    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    backend: str | None

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def is_distributed(self) -> bool:
        return self.world_size > 1


def init_distributed(device: str = "auto", timeout_minutes: int = 30) -> DistributedContext:
    """Join the process group torchrun describes (NCCL on GPU, gloo on CPU), or stay single.

    ``device``: ``auto`` (CUDA when available), ``cpu`` or ``cuda``.
    """
    if device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"device must be auto, cpu or cuda, got {device!r}")
    use_cuda = torch.cuda.is_available() if device == "auto" else device == "cuda"
    if use_cuda and not torch.cuda.is_available():
        raise RuntimeError("device=cuda was requested but CUDA is not available on this machine")
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    dev = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(dev)
    backend = None
    if world_size > 1:
        backend = "nccl" if use_cuda else "gloo"
        if not dist.is_initialized():
            dist.init_process_group(backend, timeout=datetime.timedelta(minutes=timeout_minutes))
    return DistributedContext(rank, world_size, local_rank, dev, backend)


def is_initialized() -> bool:
    return dist.is_available() and dist.is_initialized()


def get_rank() -> int:
    return dist.get_rank() if is_initialized() else 0


def get_world_size() -> int:
    return dist.get_world_size() if is_initialized() else 1


def is_main_process() -> bool:
    return get_rank() == 0


def barrier() -> None:
    if is_initialized():
        dist.barrier()


def cleanup() -> None:
    if is_initialized():
        dist.destroy_process_group()


class _AllGatherWithGrad(torch.autograd.Function):
    """all_gather whose backward sums every rank's gradient for this rank's slice.

    Written with all_reduce rather than reduce_scatter so that it also runs on gloo.
    """

    @staticmethod
    def forward(ctx, tensor: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        world = dist.get_world_size()
        ctx.rank, ctx.rows = dist.get_rank(), tensor.shape[0]
        parts = [torch.empty_like(tensor) for _ in range(world)]
        dist.all_gather(parts, tensor.contiguous())
        return torch.cat(parts)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        grad = grad.contiguous()
        dist.all_reduce(grad, op=dist.ReduceOp.SUM)
        return grad[ctx.rank * ctx.rows : (ctx.rank + 1) * ctx.rows]


def all_gather_with_grad(tensor: torch.Tensor) -> torch.Tensor:
    """Concatenate ``tensor`` from every rank along dim 0, keeping the autograd graph.

    Every rank must pass the same shape. With DDP averaging gradients, the gradients of a
    per-rank mean loss then equal those of one process on the global batch.
    """
    if get_world_size() == 1:
        return tensor
    return _AllGatherWithGrad.apply(tensor)


def all_gather_no_grad(tensor: torch.Tensor) -> torch.Tensor:
    """Concatenate ``tensor`` from every rank along dim 0 (same shape on every rank), no graph."""
    if get_world_size() == 1:
        return tensor
    parts = [torch.empty_like(tensor) for _ in range(get_world_size())]
    dist.all_gather(parts, tensor.detach().contiguous())
    return torch.cat(parts)


def all_reduce_mean(tensor: torch.Tensor) -> torch.Tensor:
    """Mean of ``tensor`` over ranks (a detached copy)."""
    tensor = tensor.detach().clone()
    if get_world_size() > 1:
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        tensor /= get_world_size()
    return tensor


def all_reduce_sum(tensor: torch.Tensor) -> torch.Tensor:
    """Sum of ``tensor`` over ranks (a detached copy)."""
    tensor = tensor.detach().clone()
    if get_world_size() > 1:
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor


def all_gather_objects(obj: Any) -> list[Any]:
    """``obj`` from every rank, in rank order (``[obj]`` without torch.distributed)."""
    if get_world_size() == 1:
        return [obj]
    gathered: list[Any] = [None] * get_world_size()
    dist.all_gather_object(gathered, obj)
    return gathered


def average_gradients(parameters: Iterable[torch.nn.Parameter]) -> None:
    """Average ``.grad`` over ranks in place, as DDP does (for steps that bypass DDP's hooks)."""
    if get_world_size() == 1:
        return
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
    flat /= get_world_size()
    offset = 0
    for g in grads:
        g.copy_(flat[offset : offset + g.numel()].view_as(g))
        offset += g.numel()
