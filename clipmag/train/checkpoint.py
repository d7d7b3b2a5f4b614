"""Atomic checkpoints and resume.

A checkpoint is written to a temporary file in the same folder and then ``os.replace``d, so a run
killed at any moment leaves either the previous checkpoint or the new one, never a torn file.
Keys follow open_clip's (``epoch``, ``name``, ``state_dict``, ``optimizer``, ``scaler``) plus what
an exact resume needs (``step``, ``samples_seen``, ``scheduler``, RNG states) and what every
consumer of the model needs (``head``, the resolved ``config``).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

from clipmag.storage.files import replace_on_success
from clipmag.train import sharding

CHECKPOINT_DIR = "checkpoints"
LATEST = "latest.pt"
BEST = "best.pt"


LEGACY_LOSS_HEAD = "loss.head."


def atomic_save(obj: Any, path: str | Path) -> None:
    """torch.save to ``path`` via a temporary file and an atomic rename."""
    with replace_on_success(path) as tmp:
        torch.save(obj, tmp)


def rng_state() -> dict[str, Any]:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def rank_rng_state(saved: dict[str, Any] | list[dict[str, Any]], rank: int) -> dict[str, Any]:
    """This rank's RNG state from a checkpoint (a list in rank order; one dict in older files).

    On another number of ranks, rank ``r`` takes saved state ``r mod saved ranks``: only dropout
    draws from it, and ``clipmag.train.dropout.resumed_rng_state`` says what that changes.
    """
    if isinstance(saved, dict):
        return saved
    return saved[rank % len(saved)]


def resolve_resume(resume: str | None, output_dir: str | Path) -> Path | None:
    """Map ``--resume`` to a checkpoint file.

    ``latest``: the run folder's latest checkpoint if there is one, else a fresh start (so the
    same command both starts and continues a run). A path: that file, a sharded checkpoint's folder,
    or a run folder with a checkpoint.
    """
    if resume in (None, "", "none"):
        return None
    if resume == "latest":
        return _run_checkpoint(Path(output_dir))
    path = Path(resume)
    if path.is_dir() and not (path / sharding.TRAINER_FILE).is_file():
        path = _run_checkpoint(path) or path / CHECKPOINT_DIR / LATEST
    if not path.exists():
        raise FileNotFoundError(
            f"train.resume: checkpoint not found: {resume} (expected a .pt file, a sharded checkpoint's folder, "
            "a run folder, or 'latest')"
        )
    return path


def _run_checkpoint(run: Path) -> Path | None:
    """A run folder's checkpoint to continue: ``latest.pt``, else its newest complete sharded one."""
    whole = run / CHECKPOINT_DIR / LATEST
    return whole if whole.is_file() else sharding.latest_sharded(run / CHECKPOINT_DIR)


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Load a checkpoint written by ``atomic_save`` (on the CPU), with a clear error for bad files.

    A sharded checkpoint's folder gives its trainer state, ``sharded: True``, and as ``state_dict``
    its weights' names and full shapes (empty tensors; the shards are loaded by the trainer)."""
    path = Path(path)
    sharded = path.is_dir()
    try:
        ckpt = torch.load(path / sharding.TRAINER_FILE if sharded else path, map_location="cpu", weights_only=False)
        if sharded:
            ckpt.update(sharded=True, state_dict=sharding.sharded_shapes(path))
    except Exception as err:  # torch raises several types for truncated or foreign files
        raise ValueError(f"{path}: not a readable clipmag checkpoint ({type(err).__name__}: {err})") from None
    missing = [k for k in ("state_dict", "step") if k not in ckpt]
    if missing:
        raise ValueError(f"{path}: checkpoint lacks keys {missing}; was it written by clipmag?")
    # Written when InfoNCE held the head: its weights were stored twice, the model's own copy besides.
    ckpt["state_dict"] = {k: v for k, v in ckpt["state_dict"].items() if not k.startswith(LEGACY_LOSS_HEAD)}
    return ckpt
