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

Ctrl-C (``SIGINT``) stops a run the same way: a terminal sends it to the process (torchrun forwards
it to every rank, and ``SIGKILL``s them after its ``--shutdown-timeout``, 30 s by default), which
saves at the step boundary and says how to continue. A second Ctrl-C quits at once without saving,
in one line: the previous checkpoint is intact, as after any kill. Both lines are written straight to
the standard error's file descriptor, which a handler may do at any moment (a ``print`` may not: it
could interrupt another write to the same stream).
"""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType
from typing import Any

import torch

from clipmag.runtime import distributed as dist_utils
from clipmag.runtime.logs import logger
from clipmag.train.checkpoint.files import RERUN

__all__ = ["STOP_SIGNALS", "RunStopped", "StopRequests"]

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2)
INTERRUPT_NOTICE = "Ctrl-C: stopping at the end of this step to save a checkpoint (Ctrl-C again quits without saving)"
QUIT_NOTICE = f"Ctrl-C again: quit without saving; the last complete checkpoint is intact: {RERUN} to continue"


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
        if signum == signal.SIGINT:
            if self.received == signal.SIGINT.name:
                _say(QUIT_NOTICE)
                os._exit(128 + signum)
            if dist_utils.get_rank() == 0:
                _say(INTERRUPT_NOTICE)
        self.received = signal.Signals(signum).name

    def stopped(self, step: int, signal_name: str, is_main: bool) -> RunStopped:
        """What ends the run once its checkpoint at ``step`` is saved; rank 0 says how to continue."""
        if is_main:
            logger.warning("%s at step %d: checkpoint saved; %s to continue", signal_name, step, RERUN)
        return RunStopped(step, signal_name)

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


def _say(line: str) -> None:
    os.write(2, f"{line}\n".encode())
