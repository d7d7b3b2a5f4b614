"""The "clipmag" logger and a run's metric sinks (console, metrics.jsonl, TensorBoard).

Library code logs through ``logging.getLogger("clipmag")`` and never configures the root logger.
Only rank 0 writes files; other ranks keep warnings on the console. A trainer may hold the run's
``out.log`` back until its folder is accepted (``hold=True``, then ``release_held_log()``): a run
refused there leaves the folder as it was, and an accepted one still logs its set-up.

A tool's ``main`` sets logging up for itself (``--quiet`` drops the "clipmag" logger to warnings,
its handlers are replaced), so a sweep that ran a preparation step or an evaluation in-process
would go on without its progress lines and its ``out.log``: :func:`caller_logging_kept` puts the
caller's level and handlers back afterwards.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import math
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

LOGGER_NAME = "clipmag"
logger = logging.getLogger(LOGGER_NAME)


class _HeldRecords(logging.handlers.MemoryHandler):
    """Keeps records in memory until ``release_held_log`` writes them to ``path``."""

    def __init__(self, path: Path) -> None:
        super().__init__(capacity=1 << 30, flushLevel=logging.CRITICAL + 1, flushOnClose=False)
        self.path = path


def _file_handler(path: Path, fmt: logging.Formatter | None) -> logging.FileHandler:
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path)
    handler.setFormatter(fmt)
    return handler


def setup_logging(
    output_dir: str | Path | None = None, rank: int = 0, level: int = logging.INFO, hold: bool = False
) -> logging.Logger:
    """Console handler (rank 0 at ``level``, other ranks warnings only) and ``out.log`` in the run
    folder; with ``hold`` the file is not touched until ``release_held_log()``."""
    log = logging.getLogger(LOGGER_NAME)
    log.setLevel(level if rank == 0 else logging.WARNING)
    log.propagate = False
    for handler in list(log.handlers):
        log.removeHandler(handler)
        handler.close()
    fmt = logging.Formatter(f"%(asctime)s [rank {rank}] %(levelname)s %(message)s", "%H:%M:%S")
    console = logging.StreamHandler(sys.stderr)
    console.setFormatter(fmt)
    log.addHandler(console)
    if output_dir is not None and rank == 0:
        path = Path(output_dir) / "out.log"
        if hold:
            held = _HeldRecords(path)
            held.setFormatter(fmt)
            log.addHandler(held)
        else:
            log.addHandler(_file_handler(path, fmt))
    return log


def release_held_log() -> None:
    """Open the ``out.log`` that ``setup_logging(hold=True)`` held back and write the records so far to it."""
    log = logging.getLogger(LOGGER_NAME)
    for held in [h for h in log.handlers if isinstance(h, _HeldRecords)]:
        file_handler = _file_handler(held.path, held.formatter)
        held.setTarget(file_handler)
        held.flush()
        log.removeHandler(held)
        held.close()
        log.addHandler(file_handler)


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


class MetricsWriter:
    """Appends one JSON object per record to ``metrics.jsonl`` and mirrors scalars to TensorBoard."""

    def __init__(self, output_dir: str | Path, tensorboard: bool = True) -> None:
        self.path = Path(output_dir) / "metrics.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._tb = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(str(Path(output_dir) / "tensorboard"))

    def write(self, step: int, kind: str, values: Mapping[str, Any]) -> None:
        record = {"step": step, "kind": kind, **{k: _plain(v) for k, v in values.items()}}
        with self.path.open("a") as f:
            f.write(json.dumps(record) + "\n")
        if self._tb is not None:
            for key, value in record.items():
                if key not in ("step", "kind") and isinstance(value, (int, float)) and not isinstance(value, bool):
                    self._tb.add_scalar(f"{kind}/{key}", value, step)

    def truncate_after(self, step: int) -> None:
        """Drop records past ``step`` (a resumed run rewrites the steps it repeats)."""
        if not self.path.exists():
            return
        kept = [line for line in self.path.read_text().splitlines() if line and json.loads(line)["step"] <= step]
        self.path.write_text("".join(line + "\n" for line in kept))

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()


def read_metrics(path: str | Path, kind: str | None = None) -> list[dict[str, Any]]:
    """Records of a ``metrics.jsonl`` (optionally only those of one kind)."""
    records = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    return [r for r in records if kind is None or r["kind"] == kind]


@contextmanager
def caller_logging_kept() -> Iterator[None]:
    """Restore the "clipmag" logger's level and handlers when the block ends (a file handler the
    block closed reopens in append mode on its next record)."""
    log = logging.getLogger(LOGGER_NAME)
    level, handlers = log.level, list(log.handlers)
    try:
        yield
    finally:
        for handler in [h for h in log.handlers if h not in handlers]:
            log.removeHandler(handler)
            handler.close()
        for handler in handlers:
            if handler not in log.handlers:
                log.addHandler(handler)
        log.setLevel(level)
