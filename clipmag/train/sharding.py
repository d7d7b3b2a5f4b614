"""FSDP for encoders too large to replicate (``train.strategy: fsdp``): parameters, gradients and
optimizer state sharded over the ranks with FSDP2 (``torch.distributed.fsdp.fully_shard``).

Under DDP every rank holds the whole model and its AdamW state, about 16 bytes a parameter before
activations: a 7B encoder needs ~112 GB on each GPU. Sharded, each rank holds 1/N of it and gathers
one block's parameters at a time. The shard units are the blocks a model names unsplittable (Hugging
Face's ``_no_split_modules``: ``BertLayer``, ``Qwen2DecoderLayer``, ...; open_clip's
``ResidualAttentionBlock``), then each whole Hugging Face model around them, so its embeddings are
sharded too. What lies outside them - the head's exponents, the logit scale, a small projection - is
a few numbers: it stays replicated and its gradients are averaged by hand, as DDP would. Mixed
precision: parameters are cast to the compute dtype for the forward pass and gradients reduced in fp32.

Checkpoints are written sharded with ``torch.distributed.checkpoint`` (every rank its part) into a
new ``sharded-step<N>`` folder; rank 0 writes ``trainer.pt`` last, so a folder with it is complete,
and only then are older folders removed: a save killed at any moment leaves the previous checkpoint
whole. DCP reshards on load, so a run saved on 2 ranks resumes on 1 or 4. Evaluation and the export
use a whole copy of the model on rank 0, built from the gathered state dict.
"""

from __future__ import annotations

import math
import re
import shutil
from collections.abc import Iterable, Mapping
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
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor

from clipmag.runtime import distributed as dist_utils
from clipmag.storage.files import open_replacing
from clipmag.train.sharded_reading import CheckedReader, load_checked

__all__ = [
    "TRAINER_FILE",
    "STEP_FOLDER_GLOB",
    "shard_units",
    "outermost_pretrained",
    "shard_model",
    "is_sharded",
    "replicated_parameters",
    "set_gradient_sync",
    "clip_grad_norm_",
    "full_model_state",
    "save_sharded",
    "latest_sharded",
    "sharded_shapes",
    "load_sharded",
]

TRAINER_FILE = "trainer.pt"  # the small state beside the shards: step, schedule, RNG, config, head
STEP_FOLDER = "sharded-step{:08d}"
STEP_FOLDER_GLOB = "sharded-step*"
STEP_FOLDER_PATTERN = re.compile(r"sharded-step(\d{8})$")
OPEN_CLIP_BLOCKS = ("ResidualAttentionBlock",)


def _unit_names(model: nn.Module) -> set[str]:
    names = {name for m in model.modules() for name in (getattr(m, "_no_split_modules", None) or ())}
    return names or set(OPEN_CLIP_BLOCKS)


def shard_units(model: nn.Module) -> list[nn.Module]:
    """The blocks sharded one by one: those the model names unsplittable, else open_clip's."""
    names = _unit_names(model)
    return [m for m in model.modules() if type(m).__name__ in names]


def outermost_pretrained(model: nn.Module) -> list[nn.Module]:
    """The Hugging Face models in ``model`` that no other one contains (their embeddings and final
    norms form one shard unit each)."""
    found: list[nn.Module] = []

    def visit(module: nn.Module) -> None:
        if getattr(module, "_no_split_modules", None):
            found.append(module)
            return
        for child in module.children():
            visit(child)

    visit(model)
    return found


def shard_model(model: nn.Module, compute_dtype: torch.dtype | None) -> nn.Module:
    """Shard ``model``'s blocks and Hugging Face models in place over the default process group."""
    policy = MixedPrecisionPolicy(param_dtype=compute_dtype, reduce_dtype=torch.float32)
    units = shard_units(model)
    if not units:
        raise ValueError(
            f"train.strategy=fsdp: {type(model).__name__} has no block to shard (looked for "
            f"{sorted(_unit_names(model))}); "
            "use train.strategy=ddp"
        )
    for unit in units:
        fully_shard(unit, mp_policy=policy)
    for pretrained in outermost_pretrained(model):
        fully_shard(pretrained, mp_policy=policy)
    return model


def is_sharded(tensor: torch.Tensor) -> bool:
    return isinstance(tensor, DTensor)


def replicated_parameters(model: nn.Module) -> list[nn.Parameter]:
    """The parameters FSDP does not manage (each rank holds all of it)."""
    return [p for p in model.parameters() if not is_sharded(p)]


def set_gradient_sync(model: nn.Module, sync: bool) -> None:
    """Whether the next backward pass reduce-scatters (off for all but the last accumulated micro-batch)."""
    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.set_requires_gradient_sync(sync, recurse=False)


def clip_grad_norm_(parameters: Iterable[nn.Parameter], max_norm: float) -> float:
    """``torch.nn.utils.clip_grad_norm_`` over sharded and replicated gradients together: the norm
    of the whole gradient, every rank's shards summed, each replicated gradient counted once."""
    grads = [p.grad for p in parameters if p.grad is not None]
    sharded = sum((g.to_local().float().pow(2).sum() for g in grads if is_sharded(g)), torch.zeros(()))
    replicated = sum((g.float().pow(2).sum() for g in grads if not is_sharded(g)), torch.zeros(()))
    device = grads[0].device if grads else torch.device("cpu")
    squares = dist_utils.all_reduce_sum(torch.as_tensor(sharded, dtype=torch.float64, device=device).reshape(1))
    total = math.sqrt(float(squares) + float(replicated))
    coef = max_norm / (total + 1e-6)
    if coef < 1.0:
        for g in grads:
            g.mul_(coef)
    return total


def full_model_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """The whole state dict on rank 0, on the CPU (empty on the other ranks); every rank calls it."""
    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    return get_model_state_dict(model, options=options)


def _sharded_state(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    return {"model": get_model_state_dict(model), "optimizer": get_optimizer_state_dict(model, optimizer)}


def _step_folders(ckpt_dir: Path) -> dict[int, Path]:
    found = {}
    for path in ckpt_dir.glob(STEP_FOLDER_GLOB):
        match = STEP_FOLDER_PATTERN.match(path.name)
        if match and path.is_dir():
            found[int(match.group(1))] = path
    return found


def latest_sharded(ckpt_dir: str | Path) -> Path | None:
    """The newest complete sharded checkpoint in ``ckpt_dir`` (one whose ``trainer.pt`` was written)."""
    complete = {step: path for step, path in _step_folders(Path(ckpt_dir)).items() if (path / TRAINER_FILE).is_file()}
    return complete[max(complete)] if complete else None


def save_sharded(
    ckpt_dir: Path, step: int, model: nn.Module, optimizer: torch.optim.Optimizer, trainer: Mapping[str, Any]
) -> Path:
    """Every rank writes its shards into ``sharded-step<step>``; rank 0 then writes ``trainer``
    (atomically, last) and removes every other step folder. Returns the folder. A save that fails
    (a full disk: every rank's ``dcp.save`` raises) removes its incomplete folder."""
    folder = ckpt_dir / STEP_FOLDER.format(step)
    if dist_utils.is_main_process():
        shutil.rmtree(folder, ignore_errors=True)  # left by a save of this step that was killed
        folder.mkdir(parents=True)
    dist_utils.barrier()
    try:
        dcp.save(_sharded_state(model, optimizer), checkpoint_id=str(folder))
        if dist_utils.is_main_process():
            with open_replacing(folder / TRAINER_FILE) as file:
                torch.save(dict(trainer), file)
    except Exception:
        if dist_utils.is_main_process():
            shutil.rmtree(folder, ignore_errors=True)
        raise
    if dist_utils.is_main_process():
        for other in _step_folders(ckpt_dir).values():
            if other != folder:
                shutil.rmtree(other, ignore_errors=True)
    dist_utils.barrier()
    return folder


def sharded_shapes(folder: Path) -> dict[str, torch.Tensor]:
    """The model's weights in ``folder`` as empty tensors of their full shapes (for resume checks),
    from its metadata read as plain data only."""
    metadata = CheckedReader(str(folder)).read_metadata().state_dict_metadata
    prefix = "model."
    return {
        key[len(prefix) :]: torch.empty(tuple(meta.size), device="meta")
        for key, meta in metadata.items()
        if key.startswith(prefix) and hasattr(meta, "size")
    }


def load_sharded(folder: Path, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """Load the shards of ``folder`` into ``model`` (sharded or whole) and ``optimizer``, whatever
    number of ranks wrote them; plain data only (:mod:`clipmag.train.sharded_reading`)."""
    state = _sharded_state(model, optimizer)
    load_checked(state, folder)
    set_model_state_dict(model, state["model"])
    set_optimizer_state_dict(model, optimizer, state["optimizer"])
