"""The models of the GPU readiness check (``gpu_check.py``): FLOPs per training sample of a trainer's
configured model, and a dropout-free copy of a text model for the loss-parity runs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from harness import count_flops

from clipmag.runtime.distributed import DistributedContext

FLOP_BATCHES = 3  # text batches are padded to their own longest texts, so the count averages a few


def flops_per_sample(trainer: str, argv: Sequence[str], device: torch.device) -> float:
    """Model FLOPs of forward + backward per sample of the model and batches that ``argv`` configures
    for ``trainer`` (``text`` or ``clip``), counted by FlopCounterMode on ``device`` as one rank.

    One rank's step leaves out only what the gathered negatives of other ranks add to the
    similarity matrix and the loss (a batch x world-batch product, negligible next to the encoders).
    """
    ctx = DistributedContext(rank=0, world_size=1, local_rank=0, device=device, backend=None)
    if trainer == "text":
        from text_retrieval.cli import parse_args
        from text_retrieval.task import TextRetrievalTask

        task = TextRetrievalTask(parse_args(argv), ctx)
    else:
        from image_text.cli import parse_args
        from image_text.task import ClipTask

        task = ClipTask(parse_args(argv), ctx)
    flops = _count(task, device)
    if device.type == "cuda":
        torch.cuda.empty_cache()  # the trainers' ranks get the memory back
    return flops / (FLOP_BATCHES * task.local_batch_size())


def _count(task: Any, device: torch.device) -> int:
    model = task.build_model().to(device).train()
    batches = task.train_batches(0)

    def steps() -> None:
        for _, batch in zip(range(FLOP_BATCHES), batches):
            model(batch)["loss"].backward()

    return count_flops(steps)


def without_dropout(name_or_path: str, folder: Path) -> Path:
    """``folder``: the model's files linked, with a ``config.json`` whose dropout probabilities are 0.

    CUDA and the CPU draw different dropout masks from the same seed, so losses compared across
    the two devices must come from a model without dropout. Built once; a second call reuses it.
    """
    from text_retrieval.model.packaged import resolve_model_name

    source = Path(resolve_model_name(name_or_path))
    if not (source / "config.json").is_file():
        raise FileNotFoundError(f"--text-model {name_or_path}: no config.json in {source} (a local model folder)")
    if (folder / "config.json").is_file():
        return folder
    folder.mkdir(parents=True)
    for entry in source.iterdir():
        if entry.name != "config.json":
            os.symlink(entry.resolve(), folder / entry.name)
    config = json.loads((source / "config.json").read_text())
    for key, value in config.items():
        if "dropout" in key and isinstance(value, float):
            config[key] = 0.0
    (folder / "config.json").write_text(json.dumps(config, indent=1) + "\n")
    return folder
