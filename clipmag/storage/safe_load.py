"""Reading ``.pt`` files without running code from them.

A ``.pt`` file is a pickle, and a pickle can name any Python callable to run while it is read
(``os.system`` as easily as a tensor constructor). Checkpoints and open_clip weights are exactly the
files people download and share, so every one is read with ``torch.load(weights_only=True)``, which
builds tensors, containers and plain values only. The one non-plain type a clipmag checkpoint ever
held is numpy's RNG state array (checkpoints before it was stored as plain lists): those few numpy
types are allowed for the read, and nothing else.

A file that needs more is refused in one line that names it and the callable it asks for. There is
no switch to read it in full: pickle runs whatever the file says, and "my own old file" is exactly
what a tampered download claims to be. Such a file is re-saved as plain data (``torch.save`` of its
state dicts) by code its owner trusts, outside clipmag.
"""

from __future__ import annotations

import pickle
import re
import warnings
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from clipmag.errors import UserError

__all__ = ["UnsafeFileError", "check_torch_weights_folder", "load_weights_only"]

_PICKLE_PROTOCOL_OPCODE = 0x80  # the first byte of a pickle (and of torch's pre-zip format)
_REBUILD_ARRAY = np.zeros(0).__reduce__()[0]  # numpy's array rebuilder, wherever this numpy keeps it
_NUMPY_RNG_ARRAY = [
    np.ndarray,
    np.dtype,
    type(np.dtype(np.uint32)),
    *((_REBUILD_ARRAY, f"{package}.multiarray._reconstruct") for package in ("numpy.core", "numpy._core")),
]


class UnsafeFileError(UserError, ValueError):
    """A file that only pickle can read, which would let it run code: refused, with its name."""


def _needs_pickle(path: Path) -> bool:
    """Whether ``path`` is a torch or pickle file at all (else it is simply not a checkpoint)."""
    if zipfile.is_zipfile(path):
        return True
    with open(path, "rb") as f:
        return f.read(1) == bytes([_PICKLE_PROTOCOL_OPCODE])


def _refused_part(err: Exception) -> str:
    """What the file asked for, from torch's weights-only error (a callable's name, else its reason)."""
    text = str(err)
    named = re.search(r"GLOBAL ([\w.]+)", text)
    if named:
        return f"it calls {named.group(1)}"
    reason = re.search(r"WeightsUnpickler error:\s*(\S.*)", text)
    return reason.group(1).strip() if reason else "torch's weights-only reader refused it"


def load_weights_only(path: str | Path) -> Any:
    """``torch.load(path)`` on the CPU, reading tensors and plain data only.

    A file that needs pickle raises ``UnsafeFileError`` naming it and what it asks for. Other errors
    (a truncated file, one that is not a torch file) are for the caller to word.
    """
    path = Path(path)
    try:
        with torch.serialization.safe_globals(_NUMPY_RNG_ARRAY), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Detected pickle protocol")  # a foreign pickle: refused below
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        if not _needs_pickle(path):
            raise pickle.UnpicklingError("not a torch or pickle file") from None
        raise UnsafeFileError(
            f"{path}: refused: not plain weights and data ({_refused_part(err)}), and reading it in full "
            "would run code from the file; if it is your own, re-save its tensors and plain values with "
            "torch.save from code you trust and use that file"
        ) from None


def check_torch_weights_folder(folder: str | Path) -> None:
    """Read a model folder's torch weights files (``*.bin``) weights-only before another library loads
    them, so that one needing pickle is refused in one line naming it (transformers' own refusal is
    a page that names no file). A folder with safetensors weights is read from those: nothing to do."""
    folder = Path(folder)
    if not folder.is_dir() or any(folder.glob("*.safetensors")):
        return
    for path in sorted(folder.glob("*.bin")):
        try:
            load_weights_only(path)
        except pickle.UnpicklingError as err:
            raise UnsafeFileError(f"{path}: not a torch weights file ({err})") from None
