"""``<run>/diverged.json``: the record a run leaves when its divergence guard stops it.

A diverged run writes no results, so without a record it looks like one that was killed or never
started. A sweep choosing a setting on dev has to tell them apart: a candidate that diverged has an
outcome (the setting does not train) and can be read as the worst candidate, while an unfinished
one must be run first. The record names the step, the statistic, its value and the limit. A new
attempt in the folder clears it first, so it always describes the folder's last attempt.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from clipmag.storage.files import write_text_atomic

__all__ = ["DIVERGED_FILE", "clear_divergence", "read_divergence", "record_divergence"]

DIVERGED_FILE = "diverged.json"


def record_divergence(run: str | Path, step: int, statistic: str, value: float, limit: float, message: str) -> None:
    """Write the record (a non-finite value is stored as its name, ``"nan"`` or ``"inf"``: JSON holds no nan)."""
    record = {
        "step": step,
        "statistic": statistic,
        "value": value if math.isfinite(value) else str(value),
        "limit": limit,
        "message": message,
    }
    Path(run).mkdir(parents=True, exist_ok=True)
    write_text_atomic(Path(run) / DIVERGED_FILE, json.dumps(record, indent=1) + "\n")


def read_divergence(run: str | Path) -> dict[str, Any] | None:
    """The run folder's record, or None when its last attempt did not diverge (or left no record)."""
    path = Path(run) / DIVERGED_FILE
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not a divergence record ({err}); remove it and run the cell again") from None
    if not isinstance(record, dict) or "step" not in record:
        raise ValueError(f"{path}: not a divergence record (no 'step'); remove it and run the cell again")
    return record


def clear_divergence(run: str | Path) -> None:
    """Remove the record of an earlier attempt: a new attempt's outcome is not known yet."""
    (Path(run) / DIVERGED_FILE).unlink(missing_ok=True)
