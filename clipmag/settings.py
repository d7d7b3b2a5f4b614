"""Configuration sections shared by both trainers (head, loss, optimizer, training loop).

Each front end composes these with its own model and data sections into one top-level dataclass;
``clipmag.config`` loads and checks it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from clipmag.heads import HEAD_NAMES

# The valid names come from the head registry, so a new head needs no edit here.
HeadName = Literal[HEAD_NAMES]  # type: ignore[valid-type]


@dataclass
class HeadConfig:
    """The similarity head; ``gq``/``gd`` are the learnable head's starting exponents."""

    name: HeadName = "cosine"
    gq: float = 0.5
    gd: float = 0.5


@dataclass
class LossConfig:
    """InfoNCE settings (paper defaults: one direction, scale 20 for every head).

    ``direction=auto`` lets the front end derive it from its objective (text: ``q2d``; CLIP:
    ``both`` for ``sym``, ``q2d`` for ``i2t`` / ``t2i``).
    """

    direction: Literal["auto", "q2d", "d2q", "both"] = "auto"
    scale: float = 20.0
    learnable_scale: bool = False
    max_scale: float = 100.0
    label_smoothing: float = 0.0


@dataclass
class OptimConfig:
    """AdamW with the paper's betas; gammas and the logit scale get their own group."""

    lr: float = 5e-6
    betas: tuple[float, ...] = (0.9, 0.98)
    eps: float = 1e-8
    weight_decay: float = 0.01
    gamma_lr: float = 1e-2
    scale_lr: float | None = None
    schedule: Literal["cosine", "linear", "constant"] = "cosine"
    warmup_steps: int = 0
    clip_grad_norm: float = 1.0


@dataclass
class TrainLoopConfig:
    """The generic loop: steps, accumulation, precision, logging, checkpoints, guards.

    ``grad_accum`` sums the gradients of that many micro-batches per optimizer step. Each
    micro-batch's InfoNCE sees only its own in-batch negatives, so accumulation multiplies the
    samples per step (and the logged ``samples_seen``) but NOT the number of negatives: it is not
    equivalent to a larger batch for a contrastive loss. For the paper's effective batch, use more
    ranks (negatives are gathered across them) or a larger ``data.batch_size``.

    ``chunk_size=N`` (0 = off) keeps the loss of the whole micro-batch - every in-batch and
    cross-rank negative - but holds activations for only N rows at a time (gradient caching,
    ``clipmag/grad_cache.py``): an exact large batch on small memory, at the cost of a second
    forward pass. The two combine: ``data.batch_size`` rows per micro-batch, cut into chunks of
    ``chunk_size``, ``grad_accum`` micro-batches per optimizer step.
    """

    output_dir: str = "runs/default"
    steps: int = 100
    grad_accum: int = 1
    chunk_size: int = 0
    # torch intra-op threads (0: torch's default, one per core). Results shift in their last bits
    # with the thread count; pin it to compare runs across machines.
    threads: int = 0
    seed: int = 0
    device: Literal["auto", "cpu", "cuda"] = "auto"
    precision: Literal["auto", "fp32", "bf16", "fp16"] = "auto"
    log_every: int = 10
    eval_every: int = 0
    save_every: int = 50
    keep_best: bool = True
    resume: str | None = None
    tensorboard: bool = True
    progress: bool = True
    max_loss: float = 1e4
    max_norm: float = 1e4
    gradient_checkpointing: bool = False
    # Write <output_dir>/export: the final model with its head, in the front end's format.
    export_final: bool = True
