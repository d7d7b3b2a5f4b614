"""Files that are complete or absent: writes go to a temporary sibling that is renamed into place
(``os.replace`` is atomic on one file system), so a killed process never leaves half a file under
the real name, and a rerun that finds the file can trust it. Downloads (:mod:`clipmag.storage.fetch`)
stream the same way."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["replace_on_success", "remove_stale_partials", "write_text_atomic", "write_bytes_atomic"]

PARTIAL_MARK = ".partial-"  # temporary names are ``.<name>.partial-<pid>``


@contextmanager
def replace_on_success(path: str | Path) -> Iterator[Path]:
    """A temporary path beside ``path``: it replaces ``path`` when the block succeeds and is removed
    when it fails. The name holds the process id, so two writers never share one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}{PARTIAL_MARK}{os.getpid()}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


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
    with replace_on_success(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)
