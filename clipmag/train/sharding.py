"""FSDP for encoders too large to replicate (``train.strategy: fsdp``): parameters, gradients and
optimizer state sharded over the ranks with FSDP2 (``torch.distributed.fsdp.fully_shard``).

Under DDP every rank holds the whole model and its AdamW state, about 16 bytes a parameter before
activations: a 7B encoder needs ~112 GB on each GPU. Sharded, each rank holds 1/N of it and gathers
one block's parameters at a time. The shard units are the blocks the model itself names as
unsplittable (Hugging Face's ``_no_split_modules``: ``BertLayer``, ``Qwen2DecoderLayer``, ...;
open_clip's ``ResidualAttentionBlock``), then the whole model, so the head and embeddings are
sharded too. Mixed precision: parameters are cast to bf16 for compute and gradients reduced in fp32.

Checkpoints are written sharded with ``torch.distributed.checkpoint`` (every rank its part) into a
folder that replaces the previous one by a rename once every rank has written, so a killed save
leaves the last checkpoint whole; DCP reshards on load, so a run saved on 2 ranks resumes on 1 or 4.
An export is written whole: the full state dict gathered on rank 0, on the CPU.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

from clipmag.runtime import distributed as dist_utils

__all__ = ["TRAINER_FILE", "shard_units", "shard_model", "full_model_state", "save_sharded", "load_sharded"]

TRAINER_FILE = "trainer.pt"  # the small state beside the shards: step, schedule, RNG, config, head
OPEN_CLIP_BLOCKS = ("ResidualAttentionBlock",)


def shard_units(model: nn.Module) -> list[nn.Module]:
    """The blocks to shard one by one: those the model names unsplittable, else open_clip's."""
    names = {name for m in model.modules() for name in (getattr(m, "_no_split_modules", None) or ())}
    names = names or set(OPEN_CLIP_BLOCKS)
    return [m for m in model.modules() if type(m).__name__ in names]


def shard_model(model: nn.Module, compute_dtype: torch.dtype | None) -> nn.Module:
    """Shard ``model`` in place over the default process group; returns it."""
    policy = MixedPrecisionPolicy(param_dtype=compute_dtype, reduce_dtype=torch.float32)
    for unit in shard_units(model):
        fully_shard(unit, mp_policy=policy)
    fully_shard(model, mp_policy=policy)
    return model


def full_model_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """The whole state dict on rank 0, on the CPU (empty on the other ranks); every rank calls it."""
    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    return get_model_state_dict(model, options=options)


def _sharded_state(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    return {"model": get_model_state_dict(model), "optimizer": get_optimizer_state_dict(model, optimizer)}


def save_sharded(
    folder: Path, model: nn.Module, optimizer: torch.optim.Optimizer, trainer: Mapping[str, Any], is_main: bool
) -> None:
    """Every rank writes its shards into ``<folder>.partial``; rank 0 adds ``trainer`` and renames it
    to ``folder`` once all have written (the previous checkpoint is removed only then)."""
    partial = folder.with_name(folder.name + ".partial")
    if is_main:
        shutil.rmtree(partial, ignore_errors=True)
    dist_utils.barrier()
    dcp.save(_sharded_state(model, optimizer), checkpoint_id=str(partial))
    if is_main:
        torch.save(dict(trainer), partial / TRAINER_FILE)
        previous = folder.with_name(folder.name + ".previous")
        if folder.exists():
            os.replace(folder, previous)
        os.replace(partial, folder)
        shutil.rmtree(previous, ignore_errors=True)
    dist_utils.barrier()


def load_sharded(folder: Path, model: nn.Module, optimizer: torch.optim.Optimizer | None) -> dict[str, Any]:
    """Load the shards of ``folder`` into the (sharded) model and optimizer, whatever number of ranks
    wrote them; returns the trainer state saved beside them."""
    state = _sharded_state(model, optimizer) if optimizer is not None else {"model": get_model_state_dict(model)}
    dcp.load(state, checkpoint_id=str(folder))
    set_model_state_dict(model, state["model"])
    if optimizer is not None:
        set_optimizer_state_dict(model, optimizer, state["optimizer"])
    return torch.load(folder / TRAINER_FILE, map_location="cpu", weights_only=False)
