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
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import IO, Any

from clipmag.config.checks import ConfigError

__all__ = ["LOCK_FILE", "FolderBusy", "FolderLock"]

LOCK_FILE = ".clipmag.lock"


class FolderBusy(ConfigError):
    """Another live process holds the folder's lock."""


def _holder(handle: IO[str]) -> dict[str, Any]:
    handle.seek(0)
    try:
        return json.loads(handle.read() or "{}")
    except json.JSONDecodeError:
        return {}


class FolderLock:
    """The exclusive lock of one folder, held from :meth:`acquire` until :meth:`release` or exit."""

    def __init__(self, folder: str | Path, what: str) -> None:
        self.folder = Path(folder)
        self.what = what  # e.g. "training run", "sweep": named in the refusal
        self._handle: IO[str] | None = None

    @property
    def path(self) -> Path:
        return self.folder / LOCK_FILE

    def acquire(self) -> FolderLock:
        """Take the lock or raise :class:`FolderBusy` at once, naming the holder."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            handle = open(self.path, "a+", encoding="utf-8")  # noqa: SIM115 - held open while the lock lives
        except OSError as err:
            raise ConfigError(
                f"{self.folder}: cannot write here ({err.strerror}); choose another output folder"
            ) from None
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(handle)
            handle.close()
            command = " ".join(holder.get("command", [])) or "unknown command"
            raise FolderBusy(
                f"{self.folder} is in use by another {holder.get('what', 'process')}: pid {holder.get('pid', '?')} "
                f"on {holder.get('host', '?')} since {holder.get('started', '?')} ({command}); "
                "wait for it to finish or choose another output folder"
            ) from None
        handle.seek(0)
        handle.truncate()
        record = {"what": self.what, "pid": os.getpid(), "host": socket.gethostname(), "command": sys.argv}
        handle.write(json.dumps({**record, "started": time.strftime("%Y-%m-%dT%H:%M:%S")}) + "\n")
        handle.flush()
        self._handle = handle
        return self

    def release(self) -> None:
        """Empty the holder record, then unlock (the file stays: unlinking a lock file races)."""
        if self._handle is not None:
            self._handle.seek(0)
            self._handle.truncate()
            fcntl.flock(self._handle, fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None

    def __enter__(self) -> FolderLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
