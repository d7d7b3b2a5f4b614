"""Whether a cell folder was restored from an earlier sitting's archive
(:mod:`clipmag_experiments.sweep.restore`), and from where: a restored cell is finished without the
checkpoint its results name, which stayed on the machine that trained it."""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["RESTORED_FILE", "restored_from"]

RESTORED_FILE = "restored.json"


def restored_from(cell_dir: Path) -> str | None:
    """The archive a cell folder was restored from (None: it trained here, or has not run)."""
    path = cell_dir / RESTORED_FILE
    if not path.is_file():
        return None
    try:
        return str(json.loads(path.read_text(encoding="utf-8"))["from"])
    except (ValueError, KeyError, TypeError):
        return None
