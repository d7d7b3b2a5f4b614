"""torch.distributed set-up from the launcher's environment, rank helpers, gathers with gradient.

Two launchers describe the world: torchrun (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` and the
rendezvous' ``MASTER_ADDR`` / ``MASTER_PORT``, on one node or several with c10d) and SLURM's
``srun`` (``SLURM_PROCID``, ``SLURM_NTASKS``, ``SLURM_LOCALID``; the first node of the job's node
list is the master, the port derives from the job id). :func:`launcher_environment` turns the
second into the first, so everything below reads one set of variables. One process without either
is the world of size 1: every helper then returns its input, so the same code path serves a laptop
smoke test and a multi-node run. Files are written by global rank 0 only (the run folder is shared
by every node); per-node caches are written atomically, so the ranks of one node may race safely.
"""

from __future__ import annotations

import datetime
import os
import re
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from clipmag.errors import ConfigError


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


SLURM_PORT_BASE = 20_000  # MASTER_PORT under srun: SLURM_PORT_BASE + job id mod 20000


def _expand_node_list(nodes: str) -> list[str]:
    """``node[1-3,7],gpu01`` -> ``[node1, node2, node3, node7, gpu01]`` (what ``scontrol show hostnames``
    prints; used where scontrol is not on the PATH, as inside some containers)."""
    names = []
    for name, ranges in re.findall(r"([^,\[]+)(?:\[([^\]]+)\])?,?", nodes):
        if not ranges:
            names.append(name)
            continue
        for part in ranges.split(","):
            low, _, high = part.partition("-")
            for number in range(int(low), int(high or low) + 1):
                names.append(f"{name}{number:0{len(low)}d}")
    return names


def _first_node(nodes: str) -> str:
    try:
        out = subprocess.run(["scontrol", "show", "hostnames", nodes], capture_output=True, text=True, check=True)
        return out.stdout.split()[0]
    except (OSError, subprocess.CalledProcessError, IndexError):
        return _expand_node_list(nodes)[0]


def launcher_environment(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The torchrun variables of this process: torchrun's own, or those ``srun`` implies (exported
    into ``os.environ`` when ``env`` is the process environment, so ``init_process_group`` reads them)."""
    source = os.environ if env is None else env
    keys = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
    if "WORLD_SIZE" in source or int(source.get("SLURM_NTASKS", "1")) <= 1:
        return {k: source[k] for k in keys if k in source}
    derived = {
        "RANK": source["SLURM_PROCID"],
        "WORLD_SIZE": source["SLURM_NTASKS"],
        "LOCAL_RANK": source.get("SLURM_LOCALID", "0"),
        "MASTER_ADDR": source.get("MASTER_ADDR") or _first_node(source["SLURM_JOB_NODELIST"]),
        "MASTER_PORT": source.get("MASTER_PORT") or str(SLURM_PORT_BASE + int(source["SLURM_JOB_ID"]) % 20_000),
    }
    if env is None:
        os.environ.update(derived)
    return derived


def environment_rank() -> int:
    """This process's global rank before the process group exists (0 without a launcher)."""
    return int(launcher_environment().get("RANK", "0"))


# How long a barrier waits at least: barriers wait for rank 0's own work (validation, a checkpoint,
# the export), which may take far longer than the collectives of a step; torch's default.
BARRIER_TIMEOUT = datetime.timedelta(minutes=30)
_barrier_group: dist.ProcessGroup | None = None  # gloo, so that waiting is host-side under NCCL too


def _cuda_devices() -> str:
    """What this machine offers CUDA, in words: its devices, or why torch sees none."""
    if torch.cuda.is_available():
        count = torch.cuda.device_count()
        return f"{count} CUDA device{'s' if count != 1 else ''} ({torch.cuda.get_device_name(0)})"
    if torch.version.cuda is None:
        return f"no CUDA device (this torch {torch.__version__} is built for the CPU only)"
    return f"no CUDA device (torch is built for CUDA {torch.version.cuda}, but finds no GPU or driver)"


def init_distributed(device: str = "auto", timeout_minutes: float = 30, key: str = "device") -> DistributedContext:
    """Join the process group torchrun describes (NCCL on GPU, gloo on CPU), or stay single.

    ``device``: ``auto`` (CUDA when available), ``cpu`` or ``cuda``; a CUDA device this machine lacks
    (none at all, or fewer than the local ranks) is one line naming the setting ``key`` and what the
    machine has. ``timeout_minutes``: how long a collective waits for the other ranks before it fails
    (:mod:`clipmag.runtime.lost_rank`); :func:`barrier` waits at least :data:`BARRIER_TIMEOUT`.
    """
    global _barrier_group
    if device not in ("auto", "cpu", "cuda"):
        raise ConfigError(f"{key} must be auto, cpu or cuda, got {device!r}")
    use_cuda = torch.cuda.is_available() if device == "auto" else device == "cuda"
    launched = launcher_environment()
    world_size = int(launched.get("WORLD_SIZE", "1"))
    rank = int(launched.get("RANK", "0"))
    local_rank = int(launched.get("LOCAL_RANK", "0"))
    if use_cuda and local_rank >= (torch.cuda.device_count() if torch.cuda.is_available() else 0):
        needs = "a CUDA device" if local_rank == 0 else f"CUDA device {local_rank} (local rank {local_rank})"
        raise ConfigError(
            f"{key}={device}: this run needs {needs}, and this machine has {_cuda_devices()}; "
            f"set {key}=cpu, or run it where the devices are"
        )
    dev = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(dev)
    backend = None
    if world_size > 1:
        backend = "nccl" if use_cuda else "gloo"
        if not dist.is_initialized():
            timeout = datetime.timedelta(minutes=timeout_minutes)
            dist.init_process_group(backend, timeout=timeout)
            _barrier_group = dist.new_group(backend="gloo", timeout=max(timeout, BARRIER_TIMEOUT))
    return DistributedContext(rank, world_size, local_rank, dev, backend)


def init_single_process_group(device: torch.device) -> None:
    """A process group of this one process, for code that needs one even alone (FSDP on one rank,
    so a sharded run resumes on a single GPU); a no-op where a group exists."""
    if not is_initialized():
        backend = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)


def is_initialized() -> bool:
    return dist.is_available() and dist.is_initialized()


def get_rank() -> int:
    return dist.get_rank() if is_initialized() else 0


def get_world_size() -> int:
    return dist.get_world_size() if is_initialized() else 1


def is_main_process() -> bool:
    return get_rank() == 0


def barrier() -> None:
    """Wait until every rank is here (in the barrier group where :func:`init_distributed` made one)."""
    if is_initialized():
        dist.barrier(group=_barrier_group)


def cleanup() -> None:
    global _barrier_group
    if is_initialized():
        dist.destroy_process_group()
    _barrier_group = None


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
