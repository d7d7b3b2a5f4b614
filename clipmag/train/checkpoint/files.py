"""Atomic checkpoints and resume.

A checkpoint is written to a temporary file in the same folder and then ``os.replace``d, so a run
killed at any moment leaves either the previous checkpoint or the new one, never a torn file; a
write that finds the disk full says so in one line with the checkpoint that remains.
Keys follow open_clip's (``epoch``, ``name``, ``state_dict``, ``optimizer``, ``scaler``) plus what
an exact resume needs (``step``, ``samples_seen``, ``scheduler``, RNG states) and what every
consumer of the model needs (``head``, the resolved ``config``); ``format`` names the schema a
resume reads it against (:mod:`clipmag.train.checkpoint.schema`).

Everything in a checkpoint is tensors and plain data (numpy's RNG state too), so it is read with
``torch.load(weights_only=True)`` (:mod:`clipmag.storage.safe_load`): a checkpoint someone hands you
cannot run code when you resume from it or evaluate it.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

from clipmag.storage.disk_full import DiskFull
from clipmag.storage.files import open_replacing
from clipmag.storage.finite import require_finite
from clipmag.storage.safe_load import UnsafeFileError, load_weights_only
from clipmag.train import sharding
from clipmag.train.checkpoint import CHECKPOINT_DIR, LATEST

RERUN = "rerun with train.resume=latest (--resume latest)"  # continues a run, or starts one that saved nothing


LEGACY_LOSS_HEAD = "loss.head."


CHECKED_BEFORE_SAVE = ("state_dict", "optimizer")  # see atomic_save


def atomic_save(obj: dict[str, Any], path: str | Path) -> None:
    """torch.save to ``path`` via a temporary file and an atomic rename (in a run's ``checkpoints``);
    refused when a number beside the weights (the head record, the best score, the schedule) is inf
    or nan. The weights are checked before every save (``require_finite_weights``) and the
    optimizer's moments only ever take finite gradients (``train_step``): reading them all again at
    every save would cost a pass over three times the model."""
    path = Path(path)
    require_finite({key: value for key, value in obj.items() if key not in CHECKED_BEFORE_SAVE}, str(path))
    try:
        with open_replacing(path) as file:
            torch.save(obj, file)
    except DiskFull as full:
        raise DiskFull(full.folder, after_full_disk(path.parent.parent)) from None


def what_remains(run: str | Path, read_step: bool = True) -> str:
    """The run folder's last complete checkpoint, which a failed write or a lost rank leaves intact
    (for messages). ``read_step`` loads it to name its step: on one rank only, as every rank of a
    node loading a whole checkpoint at once may exhaust the host's memory."""
    found = _run_checkpoint(Path(run))
    if found is None:
        return "the run has no complete checkpoint yet"
    step = ""
    if read_step:
        try:
            step = f" (step {load_checkpoint(found)['step']})"
        except ValueError:
            pass
    return f"the last complete checkpoint, {found}{step}, is intact"


def after_full_disk(run: str | Path) -> str:
    """What a full disk left of the run and what to do, for :class:`DiskFull`."""
    return f"{what_remains(run)}: free some space and {RERUN}"


def rng_state() -> dict[str, Any]:
    """This process's RNG states as tensors and plain values (numpy's key array as a list of ints)."""
    numpy = np.random.get_state(legacy=False)
    numpy["state"] = {"key": numpy["state"]["key"].tolist(), "pos": int(numpy["state"]["pos"])}
    state = {"python": random.getstate(), "numpy": numpy, "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict[str, Any]) -> None:
    """Set the RNG states of ``rng_state()`` (numpy's also as the tuple older checkpoints hold)."""
    random.setstate(state["python"])
    numpy = state["numpy"]
    if isinstance(numpy, dict):
        key = np.asarray(numpy["state"]["key"], dtype=np.uint32)
        numpy = {**numpy, "state": {"key": key, "pos": numpy["state"]["pos"]}}
    np.random.set_state(numpy)
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

    Tensors and plain data only: a file that needs pickle is refused. A sharded checkpoint's folder gives its
    trainer state, ``sharded: True``, and as ``state_dict`` its weights' names and full shapes (empty
    tensors; the shards are loaded by the trainer)."""
    path = Path(path)
    sharded = path.is_dir()
    try:
        ckpt = load_weights_only(path / sharding.TRAINER_FILE if sharded else path)
        if sharded:
            ckpt.update(sharded=True, state_dict=sharding.sharded_shapes(path))
    except UnsafeFileError:
        raise
    except Exception as err:  # torch raises several types for truncated or foreign files
        raise ValueError(
            f"{path}: not a readable clipmag checkpoint, truncated or corrupt ({type(err).__name__}: {err}); "
            "resume from another one (train.resume=PATH) or start the run again (train.overwrite=true)"
        ) from None
    missing = [k for k in ("state_dict", "step") if not isinstance(ckpt, dict) or k not in ckpt]
    if missing:
        raise ValueError(f"{path}: checkpoint lacks keys {missing}; was it written by clipmag?")
    # Written when InfoNCE held the head: its weights were stored twice, the model's own copy besides.
    ckpt["state_dict"] = {k: v for k, v in ckpt["state_dict"].items() if not k.startswith(LEGACY_LOSS_HEAD)}
    return ckpt
