"""Where negative mining writes: one output folder of shards, ``sizes.json`` and ``manifest.json``,
built in a staging folder beside it and moved into place when complete; an existing output is
replaced only when asked, and never one holding files mining did not write."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from clipmag.errors import ConfigError
from clipmag.storage.folder_lock import LOCK_FILE
from clipmag.storage.shards import SIZES_FILE

__all__ = ["MANIFEST", "check_output", "writable", "publish", "empty_but_lock"]

T = TypeVar("T")
MANIFEST = "manifest.json"

_OUTPUT_NAMES = (SIZES_FILE, MANIFEST, LOCK_FILE)


def check_output(output: Path, overwrite: bool) -> None:
    """Refuse an output that exists (unless ``overwrite``) and one that holds anything but mined shards."""
    if output.exists() and not output.is_dir():
        raise ConfigError(f"--output {output} is a file; expected a folder for the shards")
    present = sorted(p.name for p in output.iterdir()) if output.is_dir() else []
    if not present:
        return
    if not overwrite:
        raise ConfigError(f"--output {output} already exists; pass --overwrite to replace it, or choose another folder")
    foreign = [n for n in present if n not in _OUTPUT_NAMES and not (n.startswith("shard-") and n.endswith(".tar"))]
    if foreign:
        raise ConfigError(
            f"--output {output} holds files that mining did not write ({', '.join(foreign[:5])}); "
            "--overwrite replaces mined shards only: choose another folder"
        )


def writable(write: Callable[..., T], where: Path, *args: Any, **kwargs: Any) -> T:
    """``write(*args, **kwargs)``, an ``OSError`` (no space, no permission) told as one line naming ``where``."""
    try:
        return write(*args, **kwargs)
    except OSError as err:
        raise ConfigError(f"--output: cannot write {where} ({type(err).__name__}: {err})") from None


def publish(staging: Path, output: Path) -> None:
    """Move the complete ``staging`` folder to ``output``, the old output (if any) aside first."""
    if output.exists():
        old = output.with_name(f".{output.name}.old")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(output, old)
        os.replace(staging, output)
        shutil.rmtree(old)
    else:
        os.replace(staging, output)


def empty_but_lock(folder: Path) -> None:
    """Clear ``folder`` (a killed run's partial files) but for the lock file its owner holds."""
    for entry in folder.iterdir():
        if entry.is_dir():
            shutil.rmtree(entry)
        elif entry.name != LOCK_FILE:
            entry.unlink()
