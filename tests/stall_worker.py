"""Run a training script one of whose ranks stops answering before an optimizer step.

usage: stall_worker.py RANK STEP SCRIPT [ARG ...]   (under torchrun)

Rank ``RANK`` sleeps for ten minutes when it is about to take optimizer step ``STEP`` (0-based):
to the other ranks it is a rank that was stopped (``kill -STOP``), hangs or lost its node, and
they wait for it in their next collective. Nothing else of the script changes.
"""

from __future__ import annotations

import runpy
import sys
import time
from typing import Any

from clipmag.runtime import distributed as dist_utils
from clipmag.train.train_step import TrainStep

STALL_S = 600


def main() -> None:
    rank, step, script = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    real_step = TrainStep.__call__

    def stalling_step(self: TrainStep, batches: Any, index: int) -> Any:
        if index == step and dist_utils.get_rank() == rank:
            time.sleep(STALL_S)
        return real_step(self, batches, index)

    TrainStep.__call__ = stalling_step  # type: ignore[method-assign]
    sys.argv = [script, *sys.argv[4:]]
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
