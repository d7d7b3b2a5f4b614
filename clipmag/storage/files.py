"""Files that are complete or absent: writes go to a temporary sibling that is renamed into place
(``os.replace`` is atomic on one file system), so a killed process never leaves half a file under
the real name, and a rerun that finds the file can trust it. Downloads (:mod:`clipmag.storage.fetch`)
stream the same way. A write that finds its device full removes its temporary and ends in one
:class:`~clipmag.storage.disk_full.DiskFull` line naming the folder and the space left."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from clipmag.storage.disk_full import DiskFull, is_disk_full

__all__ = [
    "replace_on_success",
    "open_replacing",
    "remove_stale_partials",
    "write_text_atomic",
    "write_bytes_atomic",
    "sha256_of",
]

PARTIAL_MARK = ".partial-"  # temporary names are ``.<name>.partial-<pid>``


@contextmanager
def replace_on_success(path: str | Path) -> Iterator[Path]:
    """A temporary path beside ``path``: it replaces ``path`` when the block succeeds and is removed
    when it fails. The name holds the process id, so two writers never share one. A full device
    raises :class:`DiskFull` (once the temporary is gone, so the space it names is what is left)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}{PARTIAL_MARK}{os.getpid()}")
    full = False
    try:
        yield tmp
        os.replace(tmp, path)
    except Exception as err:
        full = is_disk_full(err)
        if not full:
            raise
    finally:
        tmp.unlink(missing_ok=True)
    if full:
        raise DiskFull(path.parent)


@contextmanager
def open_replacing(path: str | Path) -> Iterator[BinaryIO]:
    """A binary file open for writing that replaces ``path`` when the block succeeds
    (:func:`replace_on_success`). Libraries that write to a path may lose the errno of a full disk
    (``torch.save`` reports "unexpected pos"); an open file's ``write`` raises it."""
    with replace_on_success(path) as tmp, open(tmp, "wb") as file:
        yield file


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this machine (a writer that is still writing)."""
    if os.name != "posix":  # no signal-0 probe: every left-over temporary counts as stale
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def remove_stale_partials(folder: str | Path) -> list[Path]:
    """Remove the temporary files of ``replace_on_success`` in ``folder`` whose writer is gone (a
    process killed mid-write leaves one behind, as large as the file it was writing); returns them.
    A temporary of a process that still runs is kept: it may be writing right now."""
    removed = []
    for tmp in sorted(Path(folder).glob(f".*{PARTIAL_MARK}*")):
        pid = tmp.name.rpartition(PARTIAL_MARK)[2]
        if tmp.is_file() and not (pid.isdigit() and _alive(int(pid))):
            tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write UTF-8 text with ``\\n`` line ends, atomically."""
    with replace_on_success(path) as tmp:
        tmp.write_text(text, encoding="utf-8", newline="\n")
    return Path(path)


def write_bytes_atomic(path: str | Path, data: bytes) -> Path:
    with open_replacing(path) as file:
        file.write(data)
    return Path(path)


def sha256_of(path: str | Path) -> str:
    """The SHA-256 of a file's bytes, read a MiB at a time: what tells a later reader it reads the same
    file (a training set's source, a resumed run's pairs file)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
