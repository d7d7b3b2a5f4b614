"""Which code, command and settings made a result: the block every results file carries.

A number is only as good as the ability to say what produced it. Each results file (training,
evaluation, sweep cell, RAG, mining manifest, data builders) records:

* ``code``: the git commit of the checkout the running ``clipmag`` package was imported from,
  whether that tree was dirty (tracked changes or untracked files git does not ignore), and a
  sha256 of the difference (``git diff HEAD`` plus each untracked file's name and content), so two
  results from one dirty tree can still be told apart or matched; ``commit`` is ``None`` with a
  ``reason`` where there is no checkout (an installed wheel) or no git;
* ``command``: the process's ``sys.argv``, the folder it ran in (relative paths in the arguments
  are read from there) and, under torchrun, the world size;
* ``config`` and ``config_sha256``: the resolved settings and a hash of their canonical JSON
  (sorted keys), which is what two runs must share to be "the same cell".

The code state is read once per process: what a long process runs is the code it imported at its
start, whatever happens to the working tree afterwards.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["code_state", "config_sha256", "describe_code", "provenance", "same_code"]

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # the clipmag package


def _git(root: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, check=True, timeout=60).stdout


def _unknown(reason: str) -> dict[str, Any]:
    return {"commit": None, "dirty": None, "diff_sha256": None, "reason": reason}


def read_code_state(directory: Path, ignored: Sequence[str] = ()) -> dict[str, Any]:
    """The commit, dirtiness and diff hash of the git checkout holding ``directory``. A directory the
    checkout does not track (an installed copy in a git-ignored virtual environment) has none.
    ``ignored``: folders of the checkout whose changes do not count (a benchmark's own records)."""
    try:
        top = Path(_git(directory, "rev-parse", "--show-toplevel").decode().strip())
        if not _git(directory, "ls-files", "-z", "--", "."):
            return _unknown(f"{directory} is not tracked by the git checkout at {top} (an installed copy)")
        commit = _git(top, "rev-parse", "HEAD").decode().strip()
        paths = ["--", ".", *(f":(exclude){folder}" for folder in ignored)]
        status = _git(top, "status", "--porcelain", "--untracked-files=normal", *paths)
        digest = hashlib.sha256(_git(top, "diff", "HEAD", "--binary", *paths))
        others = _git(top, "ls-files", "--others", "--exclude-standard", "-z", *paths)
        for name in sorted(n for n in others.split(b"\0") if n):
            digest.update(b"\0untracked\0" + name + b"\0")
            path = top / os.fsdecode(name)
            if path.is_file():
                digest.update(path.read_bytes())
    except FileNotFoundError:
        return _unknown("git is not installed")
    except subprocess.CalledProcessError as err:
        reason = err.stderr.decode(errors="replace").strip().splitlines()[:1] or ["git failed"]
        return _unknown(f"not a git checkout ({reason[0]})")
    except (OSError, subprocess.TimeoutExpired) as err:
        return _unknown(f"git could not be read ({err})")
    dirty = bool(status.strip())
    return {"commit": commit, "dirty": dirty, "diff_sha256": digest.hexdigest() if dirty else None, "reason": None}


@functools.cache
def code_state(ignored: tuple[str, ...] = ()) -> dict[str, Any]:
    """:func:`read_code_state` of the running ``clipmag`` package, read once per process (per
    ``ignored``: folders of records a measurement writes, which are not code)."""
    return read_code_state(PACKAGE_DIR, ignored)


def same_code(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    """Whether two code states name one known version: the same commit, and the same difference
    from it (both clean, or dirty with one diff hash)."""
    if not a or not b or not a.get("commit"):
        return False
    return all(a.get(key) == b.get(key) for key in ("commit", "dirty", "diff_sha256"))


def describe_code(code: Mapping[str, Any] | None) -> str:
    """``commit <sha>``, with ``dirty tree (diff <hash>)`` when it was, or why no commit is known."""
    code = code or {}
    if not code.get("commit"):
        return f"no commit recorded ({code.get('reason') or 'written before results named their code'})"
    label = f"commit {code['commit'][:12]}"
    return f"{label}, dirty tree (diff {str(code.get('diff_sha256'))[:12]})" if code.get("dirty") else label


def config_sha256(config: Mapping[str, Any] | None) -> str | None:
    """sha256 of the canonical JSON of ``config`` (sorted keys), or None without one."""
    if config is None:
        return None
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()


def provenance(config: Mapping[str, Any] | None = None, code: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The block a results file records: code state (``code``, else :func:`code_state`), command
    line, resolved config and its hash."""
    command: dict[str, Any] = {"argv": list(sys.argv), "cwd": os.getcwd()}
    if "WORLD_SIZE" in os.environ:
        command["world_size"] = int(os.environ["WORLD_SIZE"])
    return {
        "code": dict(code if code is not None else code_state()),
        "command": command,
        "config": dict(config) if config is not None else None,
        "config_sha256": config_sha256(config),
        "recorded": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
