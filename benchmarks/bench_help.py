"""How long every console script takes to print its ``--help``, each in a fresh interpreter.

``--help`` parses the command line and prints the tool's resolved defaults; it needs no model, no
tensor library and no index, so a slow one means something heavy is imported at start-up. Each
script runs ``--rounds`` times in a new process (the best and the median wall-clock seconds are
printed), and the line names the heavy libraries that were loaded by the time the help was printed.
Nothing is written: the figures depend on the machine and on what else it is doing.

    python benchmarks/bench_help.py [--rounds 3] [--script clipmag-train-text ...]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from importlib.metadata import distribution
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HEAVY = (
    "torch",
    "transformers",
    "open_clip",
    "clip_benchmark",
    "lancedb",
    "faiss",
    "sentence_transformers",
    "numpy",
    "scipy",
)
# Runs the entry point as the console script would, then says which heavy libraries it had loaded.
CHILD = """
import importlib, sys
module, function = sys.argv[1].split(":")
sys.argv = [sys.argv[2], "--help"]
try:
    getattr(importlib.import_module(module), function)()
except SystemExit:
    pass
print("\\nLOADED " + " ".join(name for name in {heavy!r} if name in sys.modules), file=sys.stderr)
"""


def console_scripts() -> dict[str, str]:
    """Every ``[project.scripts]`` entry of the installed clipmag: name -> ``module:function``."""
    return {e.name: e.value for e in distribution("clipmag").entry_points if e.group == "console_scripts"}


def time_help(name: str, target: str) -> tuple[float, list[str]]:
    """Seconds one ``NAME --help`` takes in a fresh interpreter, and the heavy libraries it loaded."""
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", CHILD.format(heavy=HEAVY), target, name],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - start
    loaded = proc.stderr.rpartition("LOADED")[2].split() if "LOADED" in proc.stderr else ["(failed)"]
    return seconds, loaded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--script", action="append", help="only these console scripts (default: all)")
    args = parser.parse_args()
    scripts = console_scripts()
    for name in args.script or sorted(scripts):
        runs = [time_help(name, scripts[name]) for _ in range(args.rounds)]
        seconds = [s for s, _ in runs]
        loaded = ", ".join(runs[-1][1]) or "none"
        print(f"{name:32s} best {min(seconds):5.2f} s  median {statistics.median(seconds):5.2f} s  heavy: {loaded}")


if __name__ == "__main__":
    main()
