"""Run every console script's ``--help`` in this one process with standard output on a pipe whose
reader has gone, and write each exit status and what it printed on standard error as JSON.

usage: pipe_worker.py RESULTS_JSON NAME=MODULE:FUNCTION ...
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import sys


def _closed_pipe() -> int:
    read, write = os.pipe()
    os.close(read)  # no reader: every write fails with EPIPE (Python ignores SIGPIPE)
    return write


def main(results_path: str, scripts: list[str]) -> None:
    write = _closed_pipe()
    results = {}
    for spec in scripts:
        name, _, target = spec.partition("=")
        module, _, function = target.partition(":")
        entry = getattr(importlib.import_module(module), function)
        os.dup2(write, 1)
        # line-buffered: each line reaches the pipe as it is printed, as a help longer than the buffer
        # does, so the closed pipe is met inside the command, not only at its last flush
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), line_buffering=True)
        sys.argv = [name, "--help"]
        stderr = io.StringIO()
        code: object = 0
        with contextlib.redirect_stderr(stderr):
            try:
                entry()
            except SystemExit as stop:
                code = stop.code
        results[name] = {"code": code, "stderr": stderr.getvalue()}
    with open(results_path, "w", encoding="utf-8") as out:
        json.dump(results, out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
