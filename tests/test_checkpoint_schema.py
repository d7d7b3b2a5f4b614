"""Checkpoints are read against the schema of their format before a resume changes anything: a
missing key is one line naming it and the format, with the run folder untouched; an unknown key is
one warning; a stored checkpoint of format 1 (written before checkpoints carried their format) still
resumes, exactly.

``tests/data/checkpoint-format1.pt`` is the toy task's (``tests/engine_worker.py``, batch 8) latest
checkpoint at step 4 of 8, written before the format key existed, in the oldest layout the loader
reads: the RNG state of the one process as a dict and no step identity (its config is compared).
"""

from __future__ import annotations

import subprocess

import pytest
import torch
from conftest import REPO, run_python

from clipmag.runtime.logs import read_metrics
from clipmag.storage.safe_load import load_weights_only
from clipmag.train.checkpoint.schema import FORMAT

WORKER = str(REPO / "tests" / "engine_worker.py")
FORMAT_1 = REPO / "tests" / "data" / "checkpoint-format1.pt"


def _run(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return run_python(WORKER, [*args], 1, check)


def _losses(run_dir) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in read_metrics(run_dir / "metrics.jsonl", "train")}


def _error_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode != 0 and "KeyError" not in proc.stderr, proc.stderr[-3000:]
    return next(line for line in proc.stderr.splitlines() if "checkpoint" in line and "lacks" in line)


def test_a_missing_key_is_named_with_its_format_before_the_run_folder_changes(tmp_path):
    run = tmp_path / "run"
    proc = _run(str(run), "8", "fail_at=6", check=False)  # crashes after saving step 4
    assert "simulated crash" in proc.stderr
    latest = run / "checkpoints" / "latest.pt"
    ckpt = load_weights_only(latest)
    assert ckpt["format"] == FORMAT
    del ckpt["rng"]
    torch.save(ckpt, latest)
    before = {path: (path.read_bytes(), path.stat().st_mtime_ns) for path in run.rglob("*") if path.is_file()}
    line = _error_line(_run(str(run), "8", "train.resume=latest", check=False))
    assert f"{latest}: checkpoint lacks 'rng', which checkpoint format {FORMAT} holds" in line
    after = {path: (path.read_bytes(), path.stat().st_mtime_ns) for path in run.rglob("*") if path.is_file()}
    assert {p: v for p, v in after.items() if p.name != ".clipmag.lock"} == {
        p: v for p, v in before.items() if p.name != ".clipmag.lock"
    }


@pytest.mark.slow
def test_a_stored_format_1_checkpoint_resumes_to_the_uninterrupted_run(tmp_path):
    _run(str(tmp_path / "full"), "8")
    _run(str(tmp_path / "resumed"), "8", f"train.resume={FORMAT_1}")
    resumed, full = _losses(tmp_path / "resumed"), _losses(tmp_path / "full")
    assert sorted(resumed) == [5, 6, 7, 8]
    assert [resumed[step] for step in resumed] == pytest.approx([full[step] for step in resumed], rel=1e-6)


def test_an_unknown_key_is_one_warning_and_the_resume_goes_on(tmp_path):
    ckpt = load_weights_only(FORMAT_1)
    ckpt["written_by_another_tool"] = 1
    torch.save(ckpt, tmp_path / "extra.pt")
    proc = _run(str(tmp_path / "run"), "8", f"train.resume={tmp_path / 'extra.pt'}")
    warnings = [line for line in proc.stderr.splitlines() if "written_by_another_tool" in line]
    assert len(warnings) == 1 and "not read by this clipmag" in warnings[0]
    assert sorted(_losses(tmp_path / "run")) == [5, 6, 7, 8]
