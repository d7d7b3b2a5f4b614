"""What a checkpoint holds, by format version, checked before a resume changes anything.

A resume that finds a key missing deep inside ``restore`` (``KeyError: 'rng'``) has already rewritten
the run folder's ``config.yaml`` and metrics; a checkpoint is therefore read against the schema of
its format first, and a missing or mistyped key is one line naming it and the format expected. A key
no format knows is one warning (a newer clipmag's addition, or another tool's), and read past.

Format 1 is every checkpoint written before checkpoints carried their format: the RNG state of one
process (a dict) or of every rank (a list), and the step identity absent from the oldest (a resume
compares their saved config instead). Format 2 adds ``format`` itself and always holds the identity,
the config, the head and every rank's RNG state. Older formats keep resuming.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from clipmag.errors import UserError
from clipmag.runtime.logs import logger

__all__ = ["FORMAT", "FORMAT_KEY", "CheckpointSchemaError", "check_checkpoint_schema"]

FORMAT_KEY = "format"
FORMAT = 2  # what this clipmag writes
_Types = type | tuple[type, ...]
_FORMAT_1: dict[str, _Types] = {
    "step": int,
    "samples_seen": int,
    "scheduler": dict,
    "scaler": dict,
    "rng": (dict, list),
    "state_dict": dict,
}
REQUIRED: dict[int, dict[str, _Types]] = {
    1: _FORMAT_1,
    2: {**_FORMAT_1, FORMAT_KEY: int, "rng": list, "identity": dict, "config": dict, "head": dict},
}
# whole checkpoints hold the optimizer; a sharded one keeps it in its shards (``sharded``)
OPTIMIZER: dict[str, _Types] = {"optimizer": dict}
OPTIONAL: dict[str, _Types] = {
    "epoch": int,
    "name": str,
    "best": (float, int, type(None)),
    "identity": dict,
    "config": dict,
    "head": dict,
    "sharded": bool,
    "dev_curve": list,  # the validation metric at every evaluated step, so a resumed run keeps its curve
    "folder_seconds": dict,  # the run folder's training seconds up to the step, so a resumed run's time is whole
    "data_fingerprint": str,  # what data.train held, so a resume notices data that changed (data_fingerprint.py)
}
FIX = "resume from another checkpoint (train.resume=PATH) or start the run again (train.overwrite=true)"


class CheckpointSchemaError(UserError, ValueError):
    """A checkpoint that lacks a key its format holds, or holds one of another type."""


def _type_names(types: _Types) -> str:
    return " or ".join(t.__name__ for t in (types if isinstance(types, tuple) else (types,)))


def check_checkpoint_schema(ckpt: Mapping[str, Any], path: str | Path) -> None:
    """Raise :class:`CheckpointSchemaError` unless ``ckpt`` (read from ``path``) holds every key its
    format requires, each of its type; warn once about keys no format knows."""
    version = ckpt.get(FORMAT_KEY, 1)
    if not isinstance(version, int) or version not in REQUIRED:
        raise CheckpointSchemaError(
            f"{path}: checkpoint format {version!r} is not one this clipmag reads (1 to {FORMAT}); "
            f"a newer clipmag wrote it, or another program: update clipmag, or {FIX}"
        )
    required = {**REQUIRED[version], **({} if ckpt.get("sharded") else OPTIMIZER)}
    missing = [key for key in required if key not in ckpt]
    if missing:
        raise CheckpointSchemaError(
            f"{path}: checkpoint lacks {', '.join(repr(k) for k in missing)}, which checkpoint format {version} "
            f"holds (format {version}: {', '.join(required)}); {FIX}"
        )
    known = {**OPTIONAL, **required}
    for key, value in ckpt.items():
        if key in known and not isinstance(value, known[key]):
            raise CheckpointSchemaError(
                f"{path}: checkpoint key {key!r} is a {type(value).__name__}, where checkpoint format {version} "
                f"holds {_type_names(known[key])}; {FIX}"
            )
    unknown = sorted(str(key) for key in ckpt if key not in known)
    if unknown:
        logger.warning("%s: checkpoint keys %s are not read by this clipmag; ignoring them", path, ", ".join(unknown))
