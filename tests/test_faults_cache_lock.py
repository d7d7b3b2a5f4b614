"""Two evaluations sharing a corpus cache: the second waits for a live build and reads its result,
and a build whose process died is named and resumed, never mistaken for a live one (real processes)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TESTS, script_env

WORKER = TESTS / "cache_worker.py"


def _start(cache: Path, *go: Path) -> subprocess.Popen:
    command = [sys.executable, str(WORKER), str(cache), *map(str, go)]
    return subprocess.Popen(command, env=script_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _result(proc: subprocess.Popen) -> tuple[dict, str]:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1]), err


@pytest.mark.slow
def test_a_second_evaluation_waits_for_the_live_build_and_reads_it(tmp_path):
    cache, go = tmp_path / "cache", tmp_path / "go"
    first = _start(cache, go)
    try:
        assert first.stdout.readline().strip() == "encoding"  # its build holds the cache, mid-corpus
        second = _start(cache)
        waiting = ""
        while "waiting" not in waiting:
            waiting = second.stderr.readline()
            assert waiting, "the second evaluation ended without waiting"
        assert f"in use by another corpus cache build: pid {first.pid} on " in waiting
        assert waiting.rstrip().endswith("waiting for it to finish")
        go.touch()
        built, _ = _result(first)
        read, err = _result(second)
    finally:
        first.kill()
    assert built["calls"] == 5 and read["calls"] == 0  # the waiter encoded nothing: it read the cache
    assert read["sum"] == built["sum"] and "corpus embeddings from cache" in err


@pytest.mark.slow
def test_a_dead_build_is_named_and_resumed(tmp_path):
    cache = tmp_path / "cache"
    fresh, _ = _result(_start(tmp_path / "fresh"))
    dead = _start(cache, tmp_path / "never")
    assert dead.stdout.readline().strip() == "encoding"
    os.kill(dead.pid, signal.SIGKILL)
    dead.wait()
    resumed, err = _result(_start(cache))
    assert f"the build by pid {dead.pid} on " in err and "stopped before it finished" in err
    assert "resuming the corpus encoding" in err
    assert resumed["calls"] == 4 and resumed["sum"] == fresh["sum"]  # only the 4 chunks it had not written
    assert not list(cache.glob("*/embeddings.partial.npy"))
