"""Optimizer parameter groups and learning-rate schedules shared by both trainers.

Three groups, because they want different treatment (docs/method.md sections 1-2):
- the head's exponents (raw gammas): their own, larger learning rate and no weight decay, so they
  can actually move instead of staying at 0.5;
- the learnable logit scale: no weight decay (decaying a temperature is meaningless);
- the encoder: weight decay on matrices, none on biases and normalisation weights (1-d tensors).
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.distributed.tensor import DTensor

from clipmag.scoring.heads import gamma_parameters
from clipmag.train.optim_config import OptimConfig

SCALE_PARAMETER_NAMES = ("log_scale", "logit_scale")


def build_param_groups(model: nn.Module, cfg: OptimConfig) -> list[dict]:
    """AdamW groups: decayed weights, undecayed 1-d params, gammas, logit scales (empty ones dropped)."""
    gamma_ids = {id(p) for p in gamma_parameters(model)}
    groups: dict[str, dict] = {
        "decay": {"name": "decay", "params": [], "weight_decay": cfg.weight_decay, "lr": cfg.lr},
        "no_decay": {"name": "no_decay", "params": [], "weight_decay": 0.0, "lr": cfg.lr},
        "gammas": {"name": "gammas", "params": [], "weight_decay": 0.0, "lr": cfg.gamma_lr},
        "scale": {"name": "scale", "params": [], "weight_decay": 0.0, "lr": cfg.scale_lr or cfg.lr},
    }
    seen: set[int] = set()
    for name, param in model.named_parameters():
        if not param.requires_grad or id(param) in seen:
            continue
        seen.add(id(param))
        if id(param) in gamma_ids:
            key = "gammas"
        elif name.split(".")[-1] in SCALE_PARAMETER_NAMES:
            key = "scale"
        elif param.ndim < 2:
            key = "no_decay"
        else:
            key = "decay"
        groups[key]["params"].append(param)
    return [g for g in groups.values() if g["params"]]


def _split_sharded(groups: list[dict]) -> list[dict]:
    """Under FSDP a group may hold sharded (DTensor) and replicated parameters; the fused and foreach
    kernels take one kind per call, so each kind gets its own copy of the group."""
    split = []
    for group in groups:
        sharded = [p for p in group["params"] if isinstance(p, DTensor)]
        replicated = [p for p in group["params"] if not isinstance(p, DTensor)]
        split += [{**group, "params": part} for part in (replicated, sharded) if part]
    return split


def build_optimizer(model: nn.Module, cfg: OptimConfig) -> torch.optim.Optimizer:
    betas = tuple(cfg.betas)
    if len(betas) != 2:
        raise ValueError(f"optim.betas needs two values, got {list(cfg.betas)}")
    groups = _split_sharded(build_param_groups(model, cfg))
    params = [p for g in groups for p in g["params"]]
    # The fused kernel is what makes the step as fast as the HF Trainer's on CPU (the plain loop
    # costs ~20% of a MiniLM step); it needs floating parameters on a CPU or CUDA device.
    fused = bool(params) and all(p.is_floating_point() and p.device.type in ("cpu", "cuda") for p in params)
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=betas, eps=cfg.eps, fused=fused)


def lr_factor(step: int, total_steps: int, schedule: str, warmup_steps: int = 0) -> float:
    """Multiplier of the base learning rate at ``step`` (0-based): linear warm-up, then decay."""
    if warmup_steps > 0 and step < warmup_steps:
        return (step + 1) / warmup_steps
    if schedule == "constant":
        return 1.0
    progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
    progress = min(max(progress, 0.0), 1.0)
    if schedule == "linear":
        return 1.0 - progress
    if schedule == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * progress))
    raise ValueError(f"unknown schedule {schedule!r}; valid: cosine, linear, constant")


def build_scheduler(
    optimizer: torch.optim.Optimizer, cfg: OptimConfig, total_steps: int
) -> torch.optim.lr_scheduler.LambdaLR:
    """Every group follows the same shape relative to its own base learning rate."""
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: lr_factor(step, total_steps, cfg.schedule, cfg.warmup_steps)
    )
