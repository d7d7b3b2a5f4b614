"""A write that finds its device full ends in one line naming the folder and the space left.

Libraries report a full disk in their own words: Python raises ``OSError`` ENOSPC (or EDQUOT past a
quota), safetensors a ``SafetensorError`` whose text says "No space left on device (os error 28)",
``torch.distributed.checkpoint`` an exception that carries every rank's error as text, and
``torch.save`` to a path loses the errno: its zip writer sees a short write, "unexpected pos 63680 vs
63568", which a full device is what causes (clipmag gives ``torch.save`` an open file where it can,
whose ``write`` raises the ``OSError``; ``torch.distributed.checkpoint`` saves to paths).
:func:`is_disk_full` reads all of them; :class:`DiskFull` is what the user sees instead.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

from clipmag.errors import UserError

__all__ = ["DiskFull", "is_disk_full", "free_space"]

_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
_FULL_TEXTS = (*(os.strerror(code) for code in _FULL_ERRNOS), "os error 28", "[Errno 28]", "unexpected pos ")


def is_disk_full(err: BaseException) -> bool:
    """Whether ``err``, or an error it was raised from or while handling, is a full device or quota."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in _FULL_ERRNOS:
            return True
        if any(text in str(current) for text in _FULL_TEXTS):
            return True
        current = current.__cause__ or current.__context__
    return False


def free_space(folder: str | Path) -> str:
    """The space left on ``folder``'s device (or its nearest existing parent's), for people: ``1.2 MB``."""
    path = Path(folder).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    free = float(shutil.disk_usage(path).free)
    if free < 1000:
        return f"{free:.0f} bytes"
    units = ("KB", "MB", "GB", "TB")
    power = 1
    while free >= 1000 ** (power + 1) and power < len(units):
        power += 1
    return f"{free / 1000**power:.1f} {units[power - 1]}"


class DiskFull(UserError):
    """Writing into ``folder`` found no space left; ``then`` says what survived and what to do."""

    def __init__(self, folder: str | Path, then: str = "free some space and run the command again") -> None:
        self.folder = Path(folder)
        super().__init__(f"no space left on the device of {self.folder} ({free_space(self.folder)} free); {then}")
