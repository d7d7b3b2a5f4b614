"""Run a training script that dies by SIGKILL in the middle of its Nth write of ``latest.pt``.

usage: fault_worker.py N SCRIPT [ARG ...]

``torch.save`` is wrapped: the Nth time it writes the temporary file of ``checkpoints/latest.pt``,
the file is cut to half its size and the process kills itself with SIGKILL - what the OOM killer
or a pre-empted node does to a run while it saves. Nothing else of the script changes.
"""

from __future__ import annotations

import os
import runpy
import signal
import sys
from pathlib import Path
from typing import Any

import torch


def main() -> None:
    kill_at, script = int(sys.argv[1]), sys.argv[2]
    real_save = torch.save
    writes = 0

    def dying_save(obj: Any, f: Any, *args: Any, **kwargs: Any) -> None:
        nonlocal writes
        real_save(obj, f, *args, **kwargs)
        path = Path(getattr(f, "name", f))  # a path, or the open file checkpoints are written through
        if path.name.startswith(".latest.pt"):
            writes += 1
            if writes == kill_at:
                if hasattr(f, "flush"):
                    f.flush()
                os.truncate(path, os.path.getsize(path) // 2)
                os.kill(os.getpid(), signal.SIGKILL)

    torch.save = dying_save
    sys.argv = [script, *sys.argv[3:]]
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
