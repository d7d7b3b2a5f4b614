"""A safetensors file that was cut short or is not one, named before a library fails on it.

A ``model.safetensors`` truncated by a full disk, a killed copy or an interrupted download makes
safetensors fail with "incomplete metadata, file not fully covered" or "header too small", and
transformers passes that on without the file's name. The format states its own length - an 8-byte
header size, a JSON header, then the tensors at the offsets the header lists - so reading the
header tells a complete file from a truncated one without reading the weights.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

from clipmag.errors import UserError

__all__ = ["BrokenWeightsFile", "check_safetensors", "check_safetensors_folder"]

_SIZE_BYTES = 8  # the header's length, little-endian unsigned 64-bit
_REMEDY = "write or copy it again (a run's export: rerun its trainer with train.resume=latest)"


class BrokenWeightsFile(UserError, ValueError):
    """A weights file that is truncated or not in its format; the message names it and the remedy."""


def _expected_size(path: Path) -> int | None:
    """The file's length as its header states it, or None when the header is not safetensors'."""
    with path.open("rb") as file:
        size_field = file.read(_SIZE_BYTES)
        if len(size_field) < _SIZE_BYTES:
            return None
        (header_size,) = struct.unpack("<Q", size_field)
        header = file.read(min(header_size, 1 << 28))
    if len(header) < header_size:
        return _SIZE_BYTES + header_size  # cut inside the header: at least this long
    try:
        entries = json.loads(header)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(entries, dict):
        return None
    ends = [entry["data_offsets"][1] for key, entry in entries.items() if key != "__metadata__"]
    return _SIZE_BYTES + header_size + max(ends, default=0)


def check_safetensors(path: str | Path) -> None:
    """Raise :class:`BrokenWeightsFile` naming ``path`` if it is shorter than its header says or not safetensors."""
    path = Path(path)
    actual = path.stat().st_size
    try:
        expected = _expected_size(path)
    except (KeyError, IndexError, TypeError):
        expected = None
    if expected is None:
        raise BrokenWeightsFile(f"{path}: not a safetensors file ({actual:,} bytes, no valid header): {_REMEDY}")
    if actual < expected:
        raise BrokenWeightsFile(
            f"{path}: truncated ({actual:,} of the {expected:,} bytes its header describes; cut short while "
            f"written, copied or downloaded): {_REMEDY}"
        )
    if actual > expected:
        raise BrokenWeightsFile(f"{path}: {actual - expected:,} bytes past the tensors its header lists: {_REMEDY}")


def check_safetensors_folder(folder: str | Path) -> None:
    """:func:`check_safetensors` for every ``*.safetensors`` file of a model folder (nothing for a hub name)."""
    folder = Path(folder)
    if folder.is_dir():
        for path in sorted(folder.glob("*.safetensors")):
            check_safetensors(path)
