"""How long the test suite takes from a fresh clone, set-up included, as a new user or CI meets it.

It clones one clean commit of a repository next to it (the tests read ``../shared/data``), runs each
``make`` target in turn in that clone (``make test`` first makes the ``.venv``) and keeps each
target's wall clock and pytest's summary line with the commit, the CPU, its bf16 units and the core
count. ``results/speed/tests.json`` holds one entry per CPU class (model name, bf16 units, cores): a
class measured again replaces its own entry, so the README quotes every class measured. Run it alone
on the machine; a target that fails writes nothing.

    python benchmarks/bench_suite.py                              # make test, then make test-slow
    python benchmarks/bench_suite.py --targets test               # make test only
    python scripts/report.py docs                                 # the README's figures
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from harness import ROOT, load_average

from clipmag.results.provenance import read_code_state
from clipmag.runtime.machine import bf16_units, cpu_name

OUTPUT = "results/speed/tests.json"
SUMMARY = re.compile(r"^=*\s*(\d+ passed.*?)\s*=*$")  # pytest's last line, e.g. "997 passed, 63 skipped in 9.1s"


def _git(*argv: str, cwd: Path) -> str:
    return subprocess.run(["git", *argv], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def fresh_clone(repository: Path, commit: str, into: Path) -> dict[str, Any]:
    """``repository`` cloned into ``into`` at ``commit``; returns the clone's code state, read before
    any target writes its logs and ``.venv`` there."""
    if into.exists():
        raise SystemExit(f"error: {into} exists; remove it or pass --into a new folder")
    subprocess.run(["git", "clone", "--quiet", str(repository), str(into)], check=True)
    _git("checkout", "--quiet", "--detach", commit, cwd=into)
    return read_code_state(into)


def timed_target(clone: Path, target: str) -> tuple[float, str]:
    """``make target`` in the clone, its output kept in ``make-TARGET.log`` there: the wall seconds and
    pytest's summary line. A failing target stops the run with the log's path."""
    log = clone / f"make-{target}.log"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    start = time.perf_counter()
    with log.open("w", encoding="utf-8") as out:
        code = subprocess.run(["make", target], cwd=clone, env=env, stdout=out, stderr=subprocess.STDOUT).returncode
    seconds = time.perf_counter() - start
    if code != 0:
        raise SystemExit(f"error: make {target} failed (exit {code}) in {clone}; see {log}; nothing written")
    summaries = [m.group(1) for line in log.read_text(encoding="utf-8").splitlines() if (m := SUMMARY.match(line))]
    return seconds, (summaries[-1] if summaries else "no pytest summary line")


def same_class(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two entries were measured on one CPU class: model name, bf16 units and cores."""
    return all(a.get(key) == b.get(key) for key in ("cpu", "cpu_bf16", "cores"))


def merged(path: Path, entry: dict[str, Any]) -> dict[str, Any]:
    """The record at ``path`` with ``entry`` in place of its CPU class's earlier entry (or added)."""
    record = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {"runs": []}
    if "runs" not in record:
        raise SystemExit(f"error: {path}: no 'runs' list; see benchmarks/bench_suite.py for the record's shape")
    kept = [run for run in record["runs"] if not same_class(run, entry)]
    return {**record, "runs": [*kept, entry]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repository", default=str(ROOT), help="the repository to clone (default: this checkout)")
    parser.add_argument("--commit", default="HEAD", help="the commit to measure (default: the repository's HEAD)")
    parser.add_argument("--targets", nargs="+", default=["test", "test-slow"], help="make targets, in order")
    parser.add_argument("--into", default=None, help="the clone's folder (default: next to this checkout)")
    parser.add_argument("--keep", action="store_true", help="keep the clone (its .venv and logs) afterwards")
    parser.add_argument("--output", default=OUTPUT, help="the record (JSON), relative to this checkout")
    args = parser.parse_args()
    repository = Path(args.repository).resolve()
    commit = _git("rev-parse", args.commit, cwd=repository)
    into = Path(args.into) if args.into else ROOT.parent / f"clipmag-suite-{commit[:12]}"
    cpu, units, load_at_start = cpu_name(), bf16_units(), load_average()
    print(f"  {cpu}, bf16 units {units or 'none'}, {os.cpu_count()} cores; load {load_at_start}")
    code = fresh_clone(repository, commit, into)
    wall, passed = {}, {}
    for target in args.targets:
        wall[target], passed[target] = timed_target(into, target)
        print(f"  make {target}: {wall[target] / 60:.1f} minutes ({passed[target]})", flush=True)
    entry = {
        "wall_seconds": {target: round(seconds, 2) for target, seconds in wall.items()},
        "passed": passed,
        "code": code,
        "cpu": cpu,
        "cpu_bf16": units,
        "cores": os.cpu_count(),
        "measured": f"fresh clone: make {', then make '.join(args.targets)}",
        "load_average_at_start": load_at_start,
        "load_average_at_end": load_average(),
        "recorded": datetime.datetime.now().isoformat(timespec="seconds"),
    }
    output = ROOT / args.output
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(merged(output, entry), indent=1) + "\n", encoding="utf-8")
    print(f"  written: {output}")
    if not args.keep:
        shutil.rmtree(into)


if __name__ == "__main__":
    main()
