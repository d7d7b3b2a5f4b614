"""Stopping a run at a step boundary when the scheduler asks: preemption, a time limit, a requeue.

A cluster warns a job before it ends it: SLURM sends ``SIGTERM`` when it preempts, requeues or
cancels a job (and ``SIGUSR1`` / ``SIGUSR2`` ahead of a time limit to a job that asked with
``--signal``), then ``SIGKILL`` after a grace period. A handler may run between any two bytecodes,
in the middle of an optimizer step or a checkpoint write, so it only records the request. The
training loop looks at the record after every step; the ranks agree (one rank's signal stops them
all, as a checkpoint is written together), the latest checkpoint is saved and :class:`RunStopped`
ends the process with the signal's exit status. Resumed (``train.resume=latest``, as every sweep
cell runs), the run continues at that step with the same data order and random state: it is the run
it would have been without the interruption.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any

import torch

from clipmag.runtime import distributed as dist_utils
from clipmag.runtime.logs import logger

__all__ = ["STOP_SIGNALS", "RunStopped", "StopRequests"]

STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2)


class RunStopped(SystemExit):
    """The run saved its checkpoint at ``step`` and stops because of ``signal_name``; the process
    exits with 128 + the signal's number, as a shell reports a process a signal ended."""

    def __init__(self, step: int, signal_name: str) -> None:
        super().__init__(128 + signal.Signals[signal_name].value)
        self.step, self.signal_name = step, signal_name


class StopRequests:
    """Records the stop signals while installed (``with StopRequests() as stop:``); the handlers that
    were there before come back on exit. Outside the main thread nothing is installed (Python
    delivers signals to the main thread only), and nothing is ever requested."""

    def __init__(self) -> None:
        self.received: str | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopRequests:
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                self._previous[sig] = signal.signal(sig, self._record)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def _record(self, signum: int, frame: FrameType | None) -> None:
        self.received = signal.Signals(signum).name

    def agreed(self, device: torch.device) -> str | None:
        """The signal any rank received (every rank calls this at the same step), else None."""
        mine = signal.Signals[self.received].value if self.received else 0
        if dist_utils.is_initialized():
            flag = torch.tensor([mine], dtype=torch.int64, device=device)
            torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX)
            mine = int(flag.item())
        if mine and self.received is None:
            logger.info("another rank received %s", signal.Signals(mine).name)
        return signal.Signals(mine).name if mine else None
