"""A trainer's faults end in one line that says what survived and how to continue: a full disk while
a checkpoint or the export is written, a truncated weights file, Ctrl-C (once: saved at the step
boundary; twice: quit at once) and a rank that stops answering in a collective.

A full disk is real: a small tmpfs where the tests run as root, and otherwise ``/dev/full`` (which
answers every write with ENOSPC) under the name of the checkpoint's temporary file. Signals go to
the process group, as a terminal's Ctrl-C does; the stopped rank sleeps in a real torchrun job.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch
from conftest import REPO, run_python, script_env, start_script
from safetensors.torch import save_file
from test_faults_runs import CLIP, CLIP_MICRO, TEXT, WORKER, error_line, losses, steps, text_args, toy
from test_train_text import tiny_setup  # noqa: F401  (the tiny BERT fixture, found by name)

from clipmag.storage.disk_full import DiskFull
from clipmag.storage.safetensors_files import BrokenWeightsFile, check_safetensors
from clipmag.train.checkpoint.files import load_checkpoint
from clipmag.train.stop_signals import INTERRUPT_NOTICE, QUIT_NOTICE

STALL_WORKER = REPO / "tests" / "stall_worker.py"
EVAL_TEXT = REPO / "scripts" / "eval_text.py"
TEXT_SAVES = ("train.steps=6", "train.save_every=2", "train.eval_every=0")
FULL_DISK_RUNS = ("train.steps=6", "train.eval_every=0", "train.keep_best=false")


def latest_step(run: Path) -> int:
    return load_checkpoint(run / "checkpoints" / "latest.pt")["step"]


# ---- a full disk -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def full_toy_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("full")
    toy(out)
    return out


def test_a_full_disk_during_a_checkpoint_write_is_one_line_and_keeps_the_last_checkpoint(tmp_path, full_toy_run):
    """``/dev/full`` in place of the temporary file of ``latest.pt``: the step-8 save finds the disk full."""
    if not Path("/dev/full").is_char_device():
        pytest.skip("/dev/full is not the full device here")
    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        toy(out, "fail_at=6")  # latest.pt holds step 4
    partial = out / "checkpoints" / f".latest.pt.partial-{os.getpid()}"
    partial.symlink_to("/dev/full")
    with pytest.raises(DiskFull) as err:
        toy(out, "train.resume=latest")
    message = str(err.value)
    assert message.startswith(f"no space left on the device of {out / 'checkpoints'} (") and " free)" in message
    assert f"the last complete checkpoint, {out / 'checkpoints' / 'latest.pt'} (step 4), is intact" in message
    assert "train.resume=latest" in message and "\n" not in message
    assert not partial.is_symlink() and Path("/dev/full").is_char_device()
    assert latest_step(out) == 4
    toy(out, "train.resume=latest")
    assert steps(out) == list(range(1, 9)) and losses(out) == pytest.approx(losses(full_toy_run), rel=1e-6)


@pytest.fixture()
def small_disk(tmp_path: Path) -> Iterator[Callable[[int], Path]]:
    """``small_disk(mb)``: a tmpfs of that size under ``tmp_path`` (root only), unmounted afterwards."""
    mounted: list[Path] = []

    def mount(megabytes: int) -> Path:
        folder = tmp_path / f"disk{len(mounted)}"
        folder.mkdir()
        proc = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={megabytes}m", "tmpfs", str(folder)], capture_output=True, text=True
        )
        if proc.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here (root only): {proc.stderr.strip()}")
        mounted.append(folder)
        return folder

    yield mount
    for folder in mounted:
        subprocess.run(["umount", str(folder)], check=True)


@pytest.mark.slow
@pytest.mark.parametrize(
    "megabytes, save_every, folder, step",
    [(20, 2, "checkpoints", 2), (15, 0, "", 6)],  # 12 MB a checkpoint: the second does not fit; the export does not
)
def test_text_trainer_on_a_full_disk_says_so_in_one_line_and_resumes(
    text_root, small_disk, tmp_path, megabytes, save_every, folder, step
):
    settings = (*FULL_DISK_RUNS, f"train.save_every={save_every}")
    out = small_disk(megabytes) / "run"
    line = error_line(run_python(TEXT, text_args(text_root, out, *settings), check=False))
    assert f"no space left on the device of {out / folder} (" in line
    assert f"the last complete checkpoint, {out / 'checkpoints' / 'latest.pt'} (step {step}), is intact" in line
    assert latest_step(out) == step
    moved = tmp_path / "moved"  # space freed: here, the run moved to a disk with room
    shutil.copytree(out, moved)
    run_python(TEXT, text_args(text_root, moved, *settings, "--resume", "latest"))
    assert steps(moved) == [1, 2, 3, 4, 5, 6] and (moved / "export" / "model.safetensors").is_file()


# ---- a truncated weights file ------------------------------------------------------------------
@pytest.fixture(scope="module")
def text_root(request: pytest.FixtureRequest) -> Path:
    return request.getfixturevalue("tiny_setup")


@pytest.fixture(scope="module")
def text_run(text_root: Path, tmp_path_factory) -> Path:
    """A finished 6-step text run with checkpoints at steps 2, 4 and 6 and its export."""
    out = tmp_path_factory.mktemp("text") / "run"
    run_python(TEXT, text_args(text_root, out, *TEXT_SAVES))
    return out


def test_a_safetensors_file_is_checked_against_its_own_header(tmp_path):
    path = tmp_path / "model.safetensors"
    save_file({"w": torch.zeros(100)}, path)
    check_safetensors(path)
    whole = path.read_bytes()
    for cut, message in [(len(whole) - 10, "truncated"), (20, "truncated"), (5, "not a safetensors file")]:
        path.write_bytes(whole[:cut])
        with pytest.raises(BrokenWeightsFile, match=message) as err:
            check_safetensors(path)
        assert str(err.value).startswith(f"{path}: ") and "again" in str(err.value)
    path.write_bytes(whole + b"\0" * 4)
    with pytest.raises(BrokenWeightsFile, match="4 bytes past the tensors"):
        check_safetensors(path)


def test_a_truncated_clip_export_is_named_by_its_loader(tmp_path):
    from image_text.model.weights import read_weights, write_weights

    path = write_weights({"visual.proj": torch.zeros(64, 8)}, tmp_path)
    path.write_bytes(path.read_bytes()[:-16])
    with pytest.raises(BrokenWeightsFile, match="truncated") as err:
        read_weights(path)
    assert str(err.value).startswith(f"{path}: ")


@pytest.mark.slow
def test_a_truncated_export_is_named_by_the_evaluation_and_by_a_trainer_starting_from_it(text_root, text_run, tmp_path):
    export = tmp_path / "export"
    shutil.copytree(text_run / "export", export)
    weights = export / "model.safetensors"
    os.truncate(weights, weights.stat().st_size // 2)
    evaluation = ["--model", str(export), "--data", str(text_root / "beir"), "--output", str(tmp_path / "eval")]
    line = error_line(run_python(EVAL_TEXT, evaluation, check=False))
    assert f"{weights}: truncated (" in line and "again" in line
    start = text_args(text_root, tmp_path / "run", "train.steps=2", f"model.name={export}")
    line = error_line(run_python(TEXT, start, check=False))
    assert f"{weights}: truncated (" in line


@pytest.mark.slow
def test_a_truncated_checkpoint_is_named_by_resume(text_root, text_run, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(text_run, out)
    latest = out / "checkpoints" / "latest.pt"
    os.truncate(latest, latest.stat().st_size // 2)
    line = error_line(run_python(TEXT, text_args(text_root, out, *TEXT_SAVES, "--resume", "latest"), check=False))
    assert f"{latest}: not a readable clipmag checkpoint, truncated or corrupt" in line and "train.overwrite" in line


# ---- Ctrl-C ------------------------------------------------------------------------------------
def interrupt_after(proc: subprocess.Popen, out: Path, logged_steps: int, times: int = 1) -> tuple[str, float]:
    """Ctrl-C (``times`` times, 0.2 s apart) once ``logged_steps`` steps are in the metrics; the
    stderr and the seconds from the last Ctrl-C to the end."""
    metrics = out / "metrics.jsonl"
    while not (metrics.is_file() and metrics.read_text().count("\n") >= logged_steps):
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        time.sleep(0.1)
    for _ in range(times):
        os.killpg(proc.pid, signal.SIGINT)
        time.sleep(0.2)
    sent = time.monotonic()
    stderr = proc.communicate(timeout=300)[1]
    return stderr, time.monotonic() - sent


TOY_SLOW = ["step_delay_s=0.3", "train.steps=12", "train.save_every=2", "train.eval_every=0"]


@pytest.mark.slow
def test_ctrl_c_under_torchrun_stops_every_rank_at_one_step_saves_and_resumes(tmp_path):
    straight, stopped = tmp_path / "straight", tmp_path / "stopped"
    run_python(WORKER, [str(straight), "4", *TOY_SLOW[1:]], nproc=2)
    proc = start_script(WORKER, [str(stopped), "4", *TOY_SLOW], nproc=2)
    stderr, _ = interrupt_after(proc, stopped, 3)
    assert stderr.count(INTERRUPT_NOTICE) == 1, stderr[-3000:]
    (line,) = [line for line in stderr.splitlines() if "checkpoint saved" in line]
    step = latest_step(stopped)
    assert f"SIGINT at step {step}: checkpoint saved; rerun with train.resume=latest" in line and 3 <= step < 12
    assert "KeyboardInterrupt" not in stderr and "[rank" not in stderr  # no rank's traceback
    run_python(WORKER, [str(stopped), "4", *TOY_SLOW[1:], "train.resume=latest"], nproc=2)
    assert steps(stopped) == list(range(1, 13))
    assert losses(stopped) == pytest.approx(losses(straight), rel=1e-6)


@pytest.mark.slow
def test_a_second_ctrl_c_quits_at_once_in_one_line_and_the_checkpoint_before_stays(tmp_path):
    out = tmp_path / "run"
    proc = start_script(WORKER, [str(out), "4", "step_delay_s=2", "train.steps=12", "train.save_every=2"])
    stderr, seconds = interrupt_after(proc, out, 3, times=2)
    assert proc.returncode == 130 and seconds < 1.5, stderr[-3000:]
    assert stderr.strip().splitlines()[-2:] == [INTERRUPT_NOTICE, QUIT_NOTICE] and "Traceback" not in stderr
    assert latest_step(out) == 2 and "checkpoint saved" not in stderr


@pytest.mark.slow
def test_ctrl_c_stops_the_text_trainer_and_its_data_workers_at_a_step_boundary(text_root, tmp_path):
    out = tmp_path / "run"
    proc = start_script(TEXT, text_args(text_root, out, "train.steps=40", "train.eval_every=0", "data.workers=1"))
    stderr, _ = interrupt_after(proc, out, 2)
    assert proc.returncode == 130 and "Traceback" not in stderr, stderr[-3000:]
    step = latest_step(out)
    assert f"SIGINT at step {step}: checkpoint saved; rerun with train.resume=latest" in stderr and step < 40
    run_python(TEXT, text_args(text_root, out, "train.steps=40", "train.eval_every=0", "--resume", "latest"))
    assert steps(out) == list(range(1, 41))


# ---- a rank that stops answering ---------------------------------------------------------------
@pytest.mark.slow
def test_a_stopped_rank_ends_the_others_after_the_collective_timeout_in_one_line(tmp_path):
    out = tmp_path / "run"
    clip = [*CLIP_MICRO, "data.batch_size=4", "train.steps=4", "train.save_every=2", f"train.output_dir={out}"]
    launcher = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "--shutdown-timeout=1"]
    stalled = [str(STALL_WORKER), "1", "2"]  # rank 1 sleeps before step 3 (0-based 2), after the step-2 checkpoint
    command = [sys.executable, *launcher, *stalled, str(CLIP), *clip, "train.collective_timeout_s=10"]
    proc = subprocess.run(command, cwd=REPO, env=script_env(), capture_output=True, text=True, timeout=300)
    (line,) = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert line.startswith("error: rank 0 of 2 waited train.collective_timeout_s=10 s in a collective"), line
    assert "a rank died, was stopped or hangs" in line
    assert f"the last complete checkpoint, {out / 'checkpoints' / 'latest.pt'} (step 2), is intact" in line
    assert latest_step(out) == 2
