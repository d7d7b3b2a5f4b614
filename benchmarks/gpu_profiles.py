"""What the GPU readiness check (``gpu_check.py``) runs: the sizes of its runs on a GPU and in the
CPU rehearsal, and the trainer overrides that make a run of them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

SCRIPTS = {"text": "scripts/train_text.py", "clip": "scripts/train_clip.py"}


@dataclass(frozen=True)
class Size:
    """One kind of run: steps, the logging window, the batches per rank of both trainers, and how
    many bundled digits the CLIP trainer draws them from."""

    steps: int
    log_every: int
    text_batch: int
    text_lengths: tuple[int, int]  # query, document max length
    clip_batch: int
    clip_images: int


@dataclass(frozen=True)
class Profile:
    """A whole check: where it runs, at which precision and on how many ranks, and its two run sizes."""

    device: str
    precision: str
    world_size: int
    throughput: Size
    parity: Size

    @property
    def backend(self) -> str:
        """What joins the ranks (``clipmag.runtime.distributed``: NCCL on CUDA, gloo on the CPU)."""
        if self.world_size == 1:
            return "none (one rank)"
        return "nccl" if self.device == "cuda" else "gloo"


def gpu_profile(world_size: int) -> Profile:
    """300 steps at GPU sizes (the text batch is the paper's 256 across all ranks), 20 parity steps."""
    return Profile(
        device="cuda",
        precision="bf16",
        world_size=world_size,
        throughput=Size(300, 20, max(1, 256 // world_size), (64, 256), 1024, max(8192, 2 * 1024 * world_size)),
        parity=Size(20, 1, 16, (32, 64), 64, max(2048, 2 * 64 * world_size)),
    )


def cpu_profile(world_size: int) -> Profile:
    """The rehearsal without a GPU: the same runs, a few steps of small batches."""
    return Profile(
        device="cpu",
        precision="fp32",
        world_size=world_size,
        throughput=Size(6, 2, 8, (32, 64), 32, 256),
        parity=Size(3, 1, 8, (32, 64), 32, 256),
    )


def trainer_args(trainer: str, p: Profile, size: Size, out: Path, work: Path, text_model: str) -> list[str]:
    """Overrides of one trainer run of ``size``: no validation, test sets, checkpoints or export to slow it."""
    train = {
        "output_dir": out,
        "steps": size.steps,
        "log_every": size.log_every,
        "save_every": 0,
        "eval_every": 0,
        "export_final": "false",
        "tensorboard": "false",
        "progress": "false",
        "device": p.device,
        "precision": p.precision,
        "threads": max(1, (os.cpu_count() or 1) // p.world_size),
    }
    if trainer == "text":
        query, document = size.text_lengths
        data = {"batch_size": size.text_batch, "validation": "[]", "test": "[]", "bundled.root": work / "text-data"}
        model = {"name": text_model, "query_max_length": query, "document_max_length": document}
    else:
        data = {"batch_size": size.clip_batch, "bundled.train": size.clip_images, "bundled.validation": 64}
        data |= {"bundled.test": 64, "bundled.per_class": 2}
        model = {}
    sections = {"train": train, "data": data, "model": model}
    return [f"{section}.{key}={value}" for section, keys in sections.items() for key, value in keys.items()]
