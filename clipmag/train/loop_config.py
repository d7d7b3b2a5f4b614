"""The ``train`` section of every trainer's config: the generic loop's settings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from clipmag.config.checks import NonNegativeInt, PositiveFloat, PositiveInt, Seed

__all__ = ["TrainLoopConfig", "uses_fast_dropout"]


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
    ``clipmag/train/grad_cache.py``): an exact large batch on small memory, at the cost of a second
    forward pass. The two combine: ``data.batch_size`` rows per micro-batch, cut into chunks of
    ``chunk_size``, ``grad_accum`` micro-batches per optimizer step.
    """

    retired_keys: ClassVar[dict[str, str]] = {
        "trust_checkpoint": "checkpoints are read as tensors and plain data only; a file that needs pickle is "
        "refused, to be re-saved as plain data by code you trust"
    }

    output_dir: str = "runs/default"
    steps: NonNegativeInt = 100
    grad_accum: PositiveInt = 1
    chunk_size: NonNegativeInt = 0
    # torch intra-op threads (0: torch's default, one per core). Results shift in their last bits
    # with the thread count; pin it to compare runs across machines.
    threads: NonNegativeInt = 0
    seed: Seed = 0
    strategy: Literal["ddp", "fsdp"] = "ddp"
    device: Literal["auto", "cpu", "cuda"] = "auto"
    # How long a rank waits in a collective for the others before the run ends, saying so: a rank
    # that died, was stopped or hangs. Barriers, which wait for rank 0's validation, checkpoint or
    # export, wait at least 30 minutes.
    collective_timeout_s: PositiveFloat = 300.0
    precision: Literal["auto", "fp32", "bf16", "fp16"] = "auto"
    log_every: PositiveInt = 10
    eval_every: NonNegativeInt = 0
    save_every: NonNegativeInt = 50
    keep_best: bool = True
    resume: str | None = None
    # Resume even when data.train is not what the checkpoint trained on (its fingerprint differs):
    # without it such a resume is refused (clipmag/train/checkpoint/data_fingerprint.py).
    resume_other_data: bool = False
    # Replace the run already in output_dir (its checkpoints, metrics, results and export are
    # removed first); without it or ``resume``, a folder that holds a run is refused.
    overwrite: bool = False
    tensorboard: bool = True
    progress: bool = True
    max_loss: PositiveFloat = 1e4
    max_norm: PositiveFloat = 1e4
    gradient_checkpointing: bool = False
    # Dropout on the CPU from raw random bits (clipmag/train/dropout/fast.py): torch's semantics,
    # other masks than torch's; false keeps torch's dropout. The text trainer uses it. Unset, a new
    # run uses it and a resume keeps what its checkpoint ran with (torch's dropout for a checkpoint
    # from before this key); set, a resume whose checkpoint ran otherwise is refused.
    fast_dropout: bool | None = None
    # Under bf16 autocast on the CPU, train short-sequence attention (at most 128 tokens) with torch's
    # math kernel, whose backward is several times faster there than its flash kernel's
    # (clipmag.runtime.precision.training_attention). The image-text trainer uses it; false keeps
    # torch's choice. Results differ by bf16 rounding only.
    cpu_math_attention: bool = True
    # Write <output_dir>/export: the final model with its head, in the front end's format.
    export_final: bool = True

    def __post_init__(self) -> None:
        if self.strategy == "fsdp" and self.precision == "fp16":
            raise ValueError(
                "train.strategy=fsdp trains in bf16 or fp32 (fp16 needs a loss scaler that sees every shard); "
                "use train.precision=bf16"
            )


def uses_fast_dropout(loop: TrainLoopConfig) -> bool:
    """Whether a run with ``loop`` drops with the fast masks: an unset ``fast_dropout`` is a new run's
    default, on (a resume has set it to what its checkpoint ran with before the model is built)."""
    return loop.fast_dropout is not False
