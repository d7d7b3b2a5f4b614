"""The files of a CLIP model, read without running code from them.

An export holds the towers' weights as safetensors (``open_clip_model.safetensors``, the first name
open_clip's ``local-dir:`` looks for), ``open_clip_config.json`` and the head record: nothing in it
is a pickle. Exports written before hold ``open_clip_pytorch_model.bin``, a torch file of tensors.
That file, a training checkpoint and an open_clip checkpoint (``model.init``: ``.pt``, ``.bin``
or ``.safetensors``) are read as tensors and plain data only (:mod:`clipmag.storage.safe_load`); one
that needs pickle is refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from clipmag.results.record import RESULTS_FILE, read_results
from clipmag.storage.finite import require_finite
from clipmag.storage.safe_load import load_weights_only
from clipmag.storage.safetensors_files import check_safetensors

__all__ = [
    "WEIGHTS_FILE",
    "LEGACY_WEIGHTS_FILE",
    "HEAD_PREFIX",
    "export_weights_file",
    "read_weights",
    "open_clip_state_dict",
    "tested_model",
    "read_checkpoint",
    "write_weights",
]

WEIGHTS_FILE = "open_clip_model.safetensors"
LEGACY_WEIGHTS_FILE = "open_clip_pytorch_model.bin"  # exports written before safetensors
HEAD_PREFIX = "clipmag_head."


def export_weights_file(folder: Path) -> Path | None:
    """The weights file of an export folder (or an open_clip model folder), safetensors first."""
    found = [folder / name for name in (WEIGHTS_FILE, LEGACY_WEIGHTS_FILE) if (folder / name).is_file()]
    return found[0] if found else None


def read_weights(path: str | Path) -> Any:
    """What a weights file holds: a safetensors file's tensors, or a torch file read weights-only."""
    path = Path(path)
    if path.suffix == ".safetensors":
        check_safetensors(path)  # a truncated file is named, not left to the reader's bare error
        return load_file(path, device="cpu")
    return load_weights_only(path)


def open_clip_state_dict(path: str | Path) -> dict[str, torch.Tensor]:
    """Tower weights from an open_clip checkpoint, a bare state dict, or one of ours (head keys dropped)."""
    obj = read_weights(path)
    state = obj.get("state_dict", obj) if isinstance(obj, dict) else obj
    if not isinstance(state, dict):
        raise ValueError(f"{path}: not a state dict of open_clip weights (holds a {type(state).__name__})")
    state = {k[7:] if k.startswith("module.") else k: v for k, v in state.items()}
    return {k: v for k, v in state.items() if not k.startswith(HEAD_PREFIX)}


def tested_model(path: Path) -> Path:
    """For a finished run folder, the model its ``results.json`` describes (the export, or the best or
    final checkpoint it tested); any other path unchanged. A run still training has no results and
    gives its latest checkpoint."""
    if not (path.is_dir() and (path / RESULTS_FILE).is_file()):
        return path
    recorded = Path(read_results(path / RESULTS_FILE)["checkpoint"]["path"])
    candidates = [recorded, path / recorded.name, path / "checkpoints" / recorded.name]
    found = next((c for c in candidates if c.exists()), None)
    if found is None:
        raise FileNotFoundError(
            f"{path / RESULTS_FILE} names the tested model {recorded}, which is not there "
            f"(looked for {', '.join(map(str, candidates))})"
        )
    return found


def read_checkpoint(path: Path) -> dict[str, Any]:
    """A clipmag training checkpoint (``checkpoints/latest.pt`` or ``best.pt``), read weights-only."""
    ckpt = load_weights_only(path)
    if not isinstance(ckpt, dict) or "head" not in ckpt or "config" not in ckpt:
        raise ValueError(f"{path}: not a clipmag checkpoint (needs 'head' and 'config' entries)")
    return ckpt


def write_weights(state: dict[str, torch.Tensor], folder: Path) -> Path:
    """Write tower weights to ``folder`` as safetensors (each tensor's own storage: safetensors keeps
    no tensor twice) and remove an older export's torch file there."""
    require_finite(state, str(folder))
    tensors, storages = {}, set()
    for key, value in state.items():
        value = value.detach().cpu().contiguous()
        storage = value.untyped_storage().data_ptr()
        tensors[key] = value.clone() if storage in storages else value
        storages.add(storage)
    path = folder / WEIGHTS_FILE
    save_file(tensors, path, metadata={"format": "pt"})
    (folder / LEGACY_WEIGHTS_FILE).unlink(missing_ok=True)
    return path
