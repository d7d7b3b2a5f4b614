"""One live process group per output folder: an exclusive OS lock on ``<folder>/.clipmag.lock``.

Two trainings, evaluations, miners or sweeps started into one folder would interleave their logs
and metrics and leave checkpoints, exports and results from whichever finished last. The lock is
``fcntl.flock`` on a file in the folder: the kernel releases it when the holder exits, however it
exits (a crash or SIGKILL included), so a lock is never left behind by a dead process and no stale
marker needs clearing. While held, the file names its holder (pid, host, command, start time),
which is what a refused process prints; a holder that exits normally empties it again.
Distributed runs take it once, on rank 0, before any rank writes. flock locks belong to an open
file, so one process taking the same folder twice is refused too: a sweep locks its own folder,
each cell its cell folder.

A process that would rather wait than be refused (a corpus cache being built by another evaluation)
takes the lock with ``wait=True``: it logs who holds it and blocks until the kernel hands it over.
A holder record found on taking the lock was left by a holder that died without releasing it
(:attr:`FolderLock.left_by`), which tells its successor that what it finds there is unfinished.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import socket
import sys
import time
from pathlib import Path
from typing import IO, Any

from clipmag.errors import ConfigError

__all__ = ["LOCK_FILE", "FolderBusy", "FolderLock"]

logger = logging.getLogger("clipmag")
LOCK_FILE = ".clipmag.lock"


class FolderBusy(ConfigError):
    """Another live process holds the folder's lock."""


def _holder(handle: IO[str]) -> dict[str, Any]:
    handle.seek(0)
    try:
        return json.loads(handle.read() or "{}")
    except json.JSONDecodeError:
        return {}


def _remove(entry: Path) -> None:
    """Remove a file, a link (not what it leads to) or a folder with all it holds."""
    if entry.is_dir() and not entry.is_symlink():
        shutil.rmtree(entry)
    else:
        entry.unlink()


class FolderLock:
    """The exclusive lock of one folder, held from :meth:`acquire` until :meth:`release` or exit."""

    def __init__(self, folder: str | Path, what: str, file: str = LOCK_FILE) -> None:
        self.folder = Path(folder)
        self.what = what  # e.g. "training run", "sweep": named in the refusal
        self.file = file  # another name locks another writer's files in a folder a run holds
        self._handle: IO[str] | None = None
        self.left_by: dict[str, Any] = {}  # the record of a holder that died holding it, once acquired
        self.created = False  # whether acquire made the folder (see abandon)
        self.found: set[str] = set()  # what the folder held when acquire took it (see abandon)

    @property
    def path(self) -> Path:
        return self.folder / self.file

    def acquire(self, wait: bool = False) -> FolderLock:
        """Take the lock, or raise :class:`FolderBusy` at once naming the holder; with ``wait``, log
        that line and block until the holder releases it (or exits)."""
        try:
            self.created = not self.folder.exists()
            self.folder.mkdir(parents=True, exist_ok=True)
            self.found = {entry.name for entry in self.folder.iterdir()}
            handle = open(self.path, "a+", encoding="utf-8")  # noqa: SIM115 - held open while the lock lives
        except OSError as err:
            raise ConfigError(
                f"{self.folder}: cannot write here ({err.strerror}); choose another output folder"
            ) from None
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            in_use = self._in_use(_holder(handle))
            if not wait:
                handle.close()
                raise FolderBusy(f"{in_use}; wait for it to finish or choose another output folder") from None
            logger.warning("%s; waiting for it to finish", in_use)
            fcntl.flock(handle, fcntl.LOCK_EX)
        self.left_by = _holder(handle)
        handle.seek(0)
        handle.truncate()
        record = {"what": self.what, "pid": os.getpid(), "host": socket.gethostname(), "command": sys.argv}
        handle.write(json.dumps({**record, "started": time.strftime("%Y-%m-%dT%H:%M:%S")}) + "\n")
        handle.flush()
        self._handle = handle
        return self

    def _in_use(self, holder: dict[str, Any]) -> str:
        command = " ".join(holder.get("command", [])) or "unknown command"
        return (
            f"{self.folder} is in use by another {holder.get('what', 'process')}: pid {holder.get('pid', '?')} "
            f"on {holder.get('host', '?')} since {holder.get('started', '?')} ({command})"
        )

    def release(self) -> None:
        """Empty the holder record, then unlock (the file stays: unlinking a lock file races)."""
        if self._handle is not None:
            self._handle.seek(0)
            self._handle.truncate()
            fcntl.flock(self._handle, fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None

    def abandon(self, restore: bool = False) -> None:
        """Release the lock of a process that stopped before it began (a missing model, a refused
        setting), leaving the folder as it was found: with ``restore``, whatever was added to it since
        :meth:`acquire` is removed first (a refused run's ``config.yaml``, ``out.log``); then, when
        nothing added remains, the lock file goes too if it was not there before, and the folder if
        this lock created it. A folder holding anything new is only released. Idempotent."""
        if self._handle is None:
            return
        added = [p for p in self.folder.iterdir() if p.name != LOCK_FILE and p.name not in self.found]
        if restore:
            for entry in added:
                _remove(entry)
            added = []
        if added or LOCK_FILE in self.found:
            self.release()
            return
        self.path.unlink()  # still held: a process opening it now is refused, then finds no lock file
        self.release()
        if self.created:
            with contextlib.suppress(OSError):  # another process wrote into it since: it stays
                self.folder.rmdir()

    def empty(self) -> None:
        """Remove everything the held folder holds but its lock file: a staging folder's files left half
        written by a holder that died."""
        for entry in self.folder.iterdir():
            if entry.name != LOCK_FILE:
                _remove(entry)

    def __enter__(self) -> FolderLock:
        return self.acquire()

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        """Release the lock; a block that raised abandons it (:meth:`abandon`), so a folder it created and never
        wrote into is not left behind."""
        if kind is None:
            self.release()
        else:
            self.abandon()
