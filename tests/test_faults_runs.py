"""Run folders are never mixed or lost: a folder that holds a run is refused unless the new run
continues it (``train.resume``) or replaces it (``train.overwrite``); a resumed checkpoint must
belong to the same run (head, model, settings that define a step) and is checked before anything
is written; temporaries of killed checkpoint writes are removed; and a run killed by SIGKILL in
the middle of a checkpoint write resumes to the uninterrupted run's losses.

The fast tests drive the generic loop in this process with the toy task (``engine_worker.py``)
and kill it in a subprocess; the slow ones run ``scripts/train_text.py`` and
``scripts/train_clip.py`` on tiny models.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import engine_worker
import pytest
import torch
from conftest import REPO, run_python
from test_train_text import tiny_setup  # noqa: F401  (the tiny BERT fixture, found by name)
from text_fixtures import tiny_train_args

from clipmag.config.entry import USER_ERRORS
from clipmag.errors import ConfigError
from clipmag.results.record import read_results
from clipmag.runtime.logs import read_metrics
from clipmag.train.checkpoint.files import load_checkpoint
from clipmag.train.checkpoint.resume_check import ResumeMismatch
from clipmag.train.run_folder import RunFolderInUse

WORKER = REPO / "tests" / "engine_worker.py"
FAULT_WORKER = REPO / "tests" / "fault_worker.py"
TEXT = REPO / "scripts" / "train_text.py"
CLIP = REPO / "scripts" / "train_clip.py"


def toy(out: Path, *args: str, batch: int = 8) -> None:
    """Train the toy task into ``out`` in this process (8 steps, checkpoints at 4 and 8)."""
    engine_worker.run(str(out), batch, list(args))


def losses(out: Path) -> list[float]:
    return [r["loss"] for r in read_metrics(out / "metrics.jsonl", "train")]


def steps(out: Path) -> list[int]:
    return [r["step"] for r in read_metrics(out / "metrics.jsonl", "train")]


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` with its bytes: what "left untouched" is checked against."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def partials(folder: Path) -> list[Path]:
    return sorted(folder.rglob(".*.partial-*"))


def ended_pid() -> int:
    """The id of a process that has ended."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.fixture()
def clipmag_log(caplog: pytest.LogCaptureFixture):
    """The "clipmag" logger's records (it does not propagate to the root logger once set up)."""
    log = logging.getLogger("clipmag")
    log.addHandler(caplog.handler)
    caplog.set_level(logging.INFO, "clipmag")
    yield caplog
    log.removeHandler(caplog.handler)


@pytest.fixture(scope="module")
def full_run(tmp_path_factory) -> Path:
    """The toy run, uninterrupted: what every continued or replaced run must equal."""
    out = tmp_path_factory.mktemp("full")
    toy(out)
    return out


@pytest.fixture(scope="module")
def interrupted_run(tmp_path_factory) -> Path:
    """The toy run crashed at micro-batch 6: ``latest.pt`` holds step 4."""
    out = tmp_path_factory.mktemp("interrupted")
    with pytest.raises(KeyboardInterrupt):
        toy(out, "fail_at=6")
    assert load_checkpoint(out / "checkpoints" / "latest.pt")["step"] == 4
    return out


@pytest.fixture()
def interrupted(interrupted_run: Path, tmp_path: Path) -> Path:
    out = tmp_path / "run"
    shutil.copytree(interrupted_run, out)
    return out


# ---- 1. a folder that holds a run --------------------------------------------------------------
def test_a_new_run_in_a_finished_runs_folder_is_refused_and_leaves_it_untouched(tmp_path):
    out = tmp_path / "run"
    toy(out, "head.name=cosine")
    before = snapshot(out)
    with pytest.raises(RunFolderInUse) as err:
        toy(out, "head.name=dot", "train.seed=1")
    message = str(err.value)
    assert "--resume latest" in message and "--overwrite" in message
    # a different head cannot continue the run there: the new folder is named first, as the way out
    assert message.split(": use ", 1)[1].startswith("--output NEW_FOLDER (train.output_dir) to start this run")
    assert str(out) in message and "head cosine, seed 0" in message and "checkpoints/latest.pt" in message
    assert isinstance(err.value, USER_ERRORS)  # one `error:` line from the entry points
    assert snapshot(out) == before
    toy(tmp_path / "new", "head.name=dot", "train.seed=1")  # the way out the message names first
    assert steps(tmp_path / "new") == list(range(1, 9))


def test_overwrite_replaces_the_old_run_and_says_what_it_removed(tmp_path, clipmag_log):
    out, fresh = tmp_path / "run", tmp_path / "fresh"
    toy(out, "head.name=cosine")
    (out / "notes.txt").write_text("mine")
    toy(out, "head.name=dot", "train.seed=1", "train.overwrite=true")
    toy(fresh, "head.name=dot", "train.seed=1")
    assert steps(out) == list(range(1, 9)) and losses(out) == pytest.approx(losses(fresh), rel=1e-6)
    assert load_checkpoint(out / "checkpoints" / "latest.pt")["config"]["head"]["name"] == "dot"
    assert (out / "notes.txt").read_text() == "mine"
    line = next(r.getMessage() for r in clipmag_log.records if "replacing the run" in r.getMessage())
    assert "head cosine, seed 0" in line and "checkpoints/latest.pt" in line and "metrics.jsonl" in line


def test_a_fresh_folder_or_one_with_unrelated_files_starts_normally(tmp_path, full_run):
    out = tmp_path / "run"
    out.mkdir()
    (out / "cell.json").write_text("{}")
    (out / "notes.txt").write_text("mine")
    toy(out)
    assert losses(out) == pytest.approx(losses(full_run), rel=1e-6)
    assert (out / "cell.json").read_text() == "{}" and (out / "notes.txt").read_text() == "mine"


def test_resume_of_a_run_killed_before_its_first_checkpoint_restarts_without_mixing(tmp_path, full_run):
    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        toy(out, "fail_at=2")
    assert steps(out) == [1, 2] and not (out / "checkpoints" / "latest.pt").exists()
    toy(out, "train.resume=latest")
    assert steps(out) == list(range(1, 9)) and losses(out) == pytest.approx(losses(full_run), rel=1e-6)


def test_resume_finds_results_but_no_checkpoint_and_overwrite_contradicts_resume(tmp_path):
    out = tmp_path / "run"
    toy(out)
    shutil.rmtree(out / "checkpoints")  # a finished run whose checkpoints were deleted to save space
    before = snapshot(out)
    with pytest.raises(RunFolderInUse, match="no checkpoints/latest.pt to continue from: use --output NEW_FOLDER"):
        toy(out, "train.resume=latest")
    with pytest.raises(ConfigError, match="train.overwrite and train.resume=latest contradict each other"):
        toy(out, "train.resume=latest", "train.overwrite=true")
    assert snapshot(out) == before


# ---- 2. the checkpoint must belong to the same run ---------------------------------------------
@pytest.mark.parametrize(
    "change, message",
    [
        (["head.name=dot"], "head.name is 'learnable' there and 'dot' here"),
        (["head.gq=0.25"], "head.gq is 0.5 there and 0.25 here"),
        (["train.seed=3"], "train.seed is 0 there and 3 here"),
        (["train.grad_accum=2"], "train.grad_accum is 1 there and 2 here"),
        (["optim.schedule=linear"], "optim.schedule is 'cosine' there and 'linear' here"),
        (["loss.scale=5"], "loss.scale is 20.0 there and 5.0 here"),
        (["train.precision=bf16"], "train.precision is 'fp32' there and 'bfloat16' here"),
        (["BATCH=4"], "data.batch_size x ranks is 8 there and 4 here"),
    ],
)
def test_resume_into_other_settings_is_one_error_before_anything_is_written(interrupted, change, message):
    before = snapshot(interrupted)
    batch = 4 if change == ["BATCH=4"] else 8
    args = [c for c in change if not c.startswith("BATCH")]
    with pytest.raises(ResumeMismatch) as err:
        toy(interrupted, *args, "train.resume=latest", batch=batch)
    assert message in str(err.value) and "cannot resume from" in str(err.value) and "\n" not in str(err.value)
    assert isinstance(err.value, USER_ERRORS)
    assert snapshot(interrupted) == before  # config.yaml and metrics.jsonl included


def test_a_longer_run_is_refused_saying_how_to_extend_it(interrupted):
    before = snapshot(interrupted)
    with pytest.raises(ResumeMismatch) as err:
        toy(interrupted, "train.steps=12", "train.resume=latest")
    message = str(err.value)
    assert f"cannot extend the run in {interrupted} from 8 to 12 steps: its cosine schedule" in message
    assert f"--model {interrupted / 'export'} train.steps=N" in message and "optim.schedule=constant" in message
    assert "\n" not in message and snapshot(interrupted) == before


def test_settings_that_leave_a_step_unchanged_may_differ_on_resume(interrupted, full_run):
    toy(interrupted, "train.chunk_size=3", "train.save_every=2", "train.resume=latest")
    assert losses(interrupted) == pytest.approx(losses(full_run), rel=1e-5)


def test_older_checkpoints_are_compared_on_their_config_and_their_weights(interrupted):
    latest = interrupted / "checkpoints" / "latest.pt"
    ckpt = load_checkpoint(latest)
    del ckpt["identity"]  # written before the step identity was stored: its config still names the head
    del ckpt["format"]  # and so before checkpoints carried their format (format 1)
    torch.save(ckpt, latest)
    with pytest.raises(ResumeMismatch, match="head.name is 'learnable' there and 'dot' here"):
        toy(interrupted, "head.name=dot", "train.resume=latest")
    del ckpt["config"]  # nothing but weights: their names and shapes must fit the model
    torch.save(ckpt, latest)
    with pytest.raises(ResumeMismatch, match=r"the checkpoint has 2 weights this model lacks \(e.g. head.raw_d\)"):
        toy(interrupted, "head.name=dot", "train.resume=latest")


# ---- 3. temporaries of killed checkpoint writes ------------------------------------------------
def test_stale_checkpoint_temporaries_are_removed_on_resume(interrupted, full_run, clipmag_log):
    folder = interrupted / "checkpoints"
    stale = folder / f".latest.pt.partial-{ended_pid()}"
    stale.write_bytes(b"\0" * (1 << 20))
    writing = folder / f".best.pt.partial-{os.getppid()}"  # a process that still runs may be writing it
    writing.write_bytes(b"\0")
    (folder / "notes.partial.txt").write_text("mine")
    toy(interrupted, "train.resume=latest")
    assert not stale.exists() and writing.exists() and (folder / "notes.partial.txt").exists()
    assert any(str(stale) in r.getMessage() and "killed" in r.getMessage() for r in clipmag_log.records)
    assert losses(interrupted) == pytest.approx(losses(full_run), rel=1e-6)


# ---- 4. SIGKILL in the middle of a checkpoint write --------------------------------------------
@pytest.mark.parametrize("kill_at, step_saved", [(1, None), (2, 4)])
def test_sigkill_during_a_checkpoint_write_resumes_to_the_uninterrupted_losses(tmp_path, full_run, kill_at, step_saved):
    """``kill_at=1``: killed writing the first ``latest.pt`` (the restart path); ``2``: writing the last."""
    out = tmp_path / "run"
    proc = run_python(FAULT_WORKER, [str(kill_at), str(WORKER), str(out), "8"], check=False)
    assert proc.returncode == -9, proc.stderr[-2000:]
    assert partials(out), "the kill came before the checkpoint write"
    latest = out / "checkpoints" / "latest.pt"
    assert (load_checkpoint(latest)["step"] if latest.exists() else None) == step_saved
    toy(out, "train.resume=latest")
    assert steps(out) == list(range(1, 9)) and losses(out) == pytest.approx(losses(full_run), rel=1e-6)
    assert load_checkpoint(latest)["step"] == 8 and partials(out) == []


# ---- the trainers' command lines ---------------------------------------------------------------
TEXT_SHORT = ("train.steps=3", "train.eval_every=0")
TEXT_KILLED = ("train.steps=6", "train.save_every=2", "train.eval_every=0")


def text_args(root: Path, out: Path, *extra: str, model: str = "tiny") -> list[str]:
    return tiny_train_args(root / model, root, out, *extra)


def error_line(proc: subprocess.CompletedProcess) -> str:
    """The one ``error:`` line of a run the entry point stopped (no traceback)."""
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    (line,) = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    return line


@pytest.fixture(scope="module")
def text_root(request: pytest.FixtureRequest) -> Path:
    """The text-trainer tests' tiny BERT and data, plus a wider BERT (another architecture)."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    root = request.getfixturevalue("tiny_setup")
    wide = BertConfig.from_pretrained(root / "tiny")
    wide.hidden_size, wide.intermediate_size = 48, 96
    BertModel(wide).save_pretrained(root / "wide")
    AutoTokenizer.from_pretrained(root / "tiny").save_pretrained(root / "wide")
    return root


@pytest.fixture(scope="module")
def text_cosine_run(text_root: Path, tmp_path_factory) -> Path:
    """A finished 3-step cosine run of the text trainer."""
    out = tmp_path_factory.mktemp("text") / "cosine"
    run_python(TEXT, text_args(text_root, out, *TEXT_SHORT, "--norm", "cosine"))
    return out


@pytest.mark.slow
def test_text_trainer_refuses_a_second_run_and_replaces_it_on_overwrite(text_root, text_cosine_run, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(text_cosine_run, out)
    before = snapshot(out)
    second = text_args(text_root, out, *TEXT_SHORT, "--norm", "dot", "--seed", "1")
    line = error_line(run_python(TEXT, second, check=False))
    assert "--resume latest" in line and "--overwrite" in line and str(out) in line
    assert snapshot(out) == before  # latest.pt, export, results.json, metrics.jsonl and out.log
    run_python(TEXT, [*second, "train.overwrite=true"])
    results = read_results(out / "results.json")
    assert results["head"]["head"]["name"] == "dot" and results["run"]["seed"] == 1
    assert steps(out) == [1, 2, 3]
    log = (out / "out.log").read_text()
    assert "replacing the run" in log and "head cosine, seed 0" in log and log.count("step 3/3 loss") == 1


@pytest.mark.slow
@pytest.mark.parametrize(
    "norm, model, message",
    [
        ("dnorm", "tiny", "head.name is 'cosine' there and 'dnorm' here"),
        ("learnable", "tiny", "head.name is 'cosine' there and 'learnable' here"),
        ("cosine", "wide", "model is '{root}/tiny' there and '{root}/wide' here"),
    ],
)
def test_text_trainer_resume_of_another_run_is_one_error_line(
    text_root,
    text_cosine_run,
    tmp_path,
    norm,
    model,
    message,
):
    out = tmp_path / "run"
    shutil.copytree(text_cosine_run, out)
    before = snapshot(out)
    args = text_args(text_root, out, *TEXT_SHORT, "--norm", norm, "--resume", "latest", model=model)
    line = error_line(run_python(TEXT, args, check=False))
    assert message.format(root=text_root) in line and "cannot resume from" in line
    assert snapshot(out) == before  # config.yaml is written only once the checkpoint fits


@pytest.mark.slow
def test_text_trainer_killed_during_a_checkpoint_write_resumes_exactly(text_root, tmp_path):
    full, killed = tmp_path / "full", tmp_path / "killed"
    run_python(TEXT, text_args(text_root, full, *TEXT_KILLED))
    proc = run_python(FAULT_WORKER, ["2", str(TEXT), *text_args(text_root, killed, *TEXT_KILLED)], check=False)
    assert proc.returncode == -9 and partials(killed), proc.stderr[-2000:]
    assert load_checkpoint(killed / "checkpoints" / "latest.pt")["step"] == 2
    proc = run_python(TEXT, text_args(text_root, killed, *TEXT_KILLED, "--resume", "latest"))
    assert "left by a checkpoint write that was killed" in proc.stderr and partials(killed) == []
    assert losses(killed) == pytest.approx(losses(full), rel=1e-5)
    ndcg = [read_results(out / "results.json")["metrics"]["beir"]["NDCG@10"] for out in (full, killed)]
    assert ndcg[1] == pytest.approx(ndcg[0], abs=1e-6)


CLIP_MICRO = [
    "model.name=clipmag-micro",
    "data.bundled.train=64",
    "data.bundled.validation=16",
    "data.bundled.test=16",
    "data.bundled.per_class=2",
    "data.batch_size=8",
    "train.steps=2",
    "train.log_every=1",
    "train.tensorboard=false",
    "train.progress=false",
    "train.device=cpu",
    "train.precision=fp32",
    "optim.warmup_steps=0",
]


@pytest.mark.slow
def test_clip_trainer_refuses_resumes_and_replaces_by_the_same_rules(tmp_path):
    out = tmp_path / "run"
    clip = [*CLIP_MICRO, f"train.output_dir={out}"]
    run_python(CLIP, [*clip, "--objective", "sym"])
    before = snapshot(out)
    line = error_line(run_python(CLIP, [*clip, "--objective", "i2t"], check=False))
    assert "--resume latest" in line and "--overwrite" in line
    line = error_line(run_python(CLIP, [*clip, "--objective", "i2t", "--resume", "latest"], check=False))
    assert "objective is 'sym' there and 'i2t' here" in line and "loss.direction is 'both' there and 'q2d' here" in line
    assert snapshot(out) == before
    run_python(CLIP, [*clip, "--objective", "sym", "--resume", "latest"])  # the same run: continues (here: re-tests)
    run_python(CLIP, [*clip, "--objective", "i2t", "train.overwrite=true"])
    assert read_results(out / "results.json")["run"]["objective"] == "i2t" and steps(out) == [1, 2]
