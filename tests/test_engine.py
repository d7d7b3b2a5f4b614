"""The generic loop: exact resume, divergence guard, best/latest checkpoints, and two gloo
processes matching one process with the doubled batch."""

from __future__ import annotations

import json
import subprocess

import pytest
import torch
from conftest import REPO, run_python

from clipmag.runtime.logs import read_metrics
from clipmag.scoring.head_record import HeadRecord
from clipmag.train.checkpoint.files import load_checkpoint, resolve_resume
from clipmag.train.diverged_record import DIVERGED_FILE, read_divergence
from clipmag.train.run_checkpoints import carried_seconds

WORKER = str(REPO / "tests" / "engine_worker.py")


def _run(args: list[str], nproc: int = 1, check: bool = True) -> subprocess.CompletedProcess:
    return run_python(WORKER, args, nproc, check)


def _losses(run_dir) -> list[float]:
    return [r["loss"] for r in read_metrics(run_dir / "metrics.jsonl", "train")]


def test_run_writes_config_metrics_checkpoints_and_export(tmp_path):
    _run([str(tmp_path), "8"])
    assert (tmp_path / "config.yaml").is_file()
    assert (tmp_path / "checkpoints" / "latest.pt").is_file()
    assert (tmp_path / "checkpoints" / "best.pt").is_file()
    assert (tmp_path / "export" / "model.pt").is_file()
    ckpt = load_checkpoint(tmp_path / "checkpoints" / "latest.pt")
    assert ckpt["step"] == 8 and ckpt["samples_seen"] == 64
    record = HeadRecord.from_dict(ckpt["head"])
    assert record.head_name == "learnable" and record.head["gq"] != 0.5 and record.loss_direction == "q2d"
    records = read_metrics(tmp_path / "metrics.jsonl", "train")
    assert [r["step"] for r in records] == list(range(1, 9))
    assert {
        "loss",
        "lr",
        "gamma_q",
        "gamma_d",
        "q_norm_mean",
        "q_norm_cv",
        "d_norm_cv",
        "effective_temperature",
        "samples_per_s",
    } <= set(records[0])


@pytest.mark.slow
def test_killed_run_resumes_to_the_same_result(tmp_path):
    full, crashed = tmp_path / "full", tmp_path / "crashed"
    _run([str(full), "8"])
    proc = _run([str(crashed), "8", "fail_at=6"], check=False)
    assert proc.returncode != 0 and "simulated crash" in proc.stderr
    assert load_checkpoint(crashed / "checkpoints" / "latest.pt")["step"] == 4
    resumed = _run([str(crashed), "8", "train.resume=latest"])
    assert "not read by this clipmag" not in resumed.stderr  # every key the engine writes is one it reads
    assert _losses(crashed) == pytest.approx(_losses(full), rel=1e-6)
    a = load_checkpoint(full / "checkpoints" / "latest.pt")["state_dict"]
    b = load_checkpoint(crashed / "checkpoints" / "latest.pt")["state_dict"]
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=1e-6, atol=1e-7)


def test_a_resumed_run_counts_the_time_of_every_attempt(tmp_path):
    proc = _run([str(tmp_path), "8", "fail_at=6", "step_delay_s=0.05"], check=False)
    assert proc.returncode != 0
    stopped = load_checkpoint(tmp_path / "checkpoints" / "latest.pt")["folder_seconds"]
    assert stopped["folder"] == str(tmp_path.resolve()) and stopped["seconds"] >= 4 * 0.05
    _run([str(tmp_path), "8", "train.resume=latest", "step_delay_s=0.05"])
    final = load_checkpoint(tmp_path / "checkpoints" / "latest.pt")["folder_seconds"]
    assert final["seconds"] >= stopped["seconds"] + 4 * 0.05  # the first attempt's four steps are kept


def test_carried_seconds_belong_to_the_folder_that_trained(tmp_path):
    own = {"folder_seconds": {"folder": str(tmp_path.resolve()), "seconds": 12.5}}
    assert carried_seconds(own, tmp_path) == 12.5
    assert carried_seconds(own, tmp_path / "continued") == 0.0  # a continued cell counts what it adds
    assert carried_seconds({"step": 4}, tmp_path) is None  # an old checkpoint: the earlier time is unknown


@pytest.mark.slow
def test_two_processes_match_one_process_with_doubled_batch(tmp_path):
    _run([str(tmp_path / "one"), "8"])
    _run([str(tmp_path / "two"), "4"], nproc=2)
    assert _losses(tmp_path / "two") == pytest.approx(_losses(tmp_path / "one"), rel=1e-4)


def test_divergence_stops_with_step_and_statistic(tmp_path):
    proc = _run([str(tmp_path), "8", "head.name=dot", "train.max_loss=0.5"], check=False)
    assert proc.returncode != 0
    assert "training diverged at step 1: loss" in proc.stderr
    assert not (tmp_path / "checkpoints" / "latest.pt").exists()
    record = read_divergence(tmp_path)  # what a sweep's choice reads: the run has an outcome
    assert record is not None and (record["step"], record["statistic"], record["limit"]) == (1, "loss", 0.5)
    assert record["value"] > 0.5 and record["message"] in proc.stderr
    _run([str(tmp_path), "8", "head.name=dot", "train.resume=latest"])  # a new attempt that trains
    assert read_divergence(tmp_path) is None and (tmp_path / "export" / "model.pt").is_file()


def test_a_non_finite_statistic_is_recorded_by_name(tmp_path):
    proc = _run([str(tmp_path), "8", "nan_gradient_at=2"], check=False)
    assert proc.returncode != 0
    text = (tmp_path / DIVERGED_FILE).read_text()
    assert json.loads(text)["value"] == "nan" and "NaN" not in text  # strict JSON, no nan literal


def test_resume_from_missing_checkpoint_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="train.resume: checkpoint not found"):
        resolve_resume(str(tmp_path / "nope.pt"), tmp_path)
    assert resolve_resume("latest", tmp_path) is None
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="not a readable clipmag checkpoint"):
        load_checkpoint(bad)


@pytest.mark.slow
def test_chunked_steps_match_the_unchunked_batch_on_one_and_two_processes(tmp_path):
    _run([str(tmp_path / "plain"), "8"])
    _run([str(tmp_path / "chunked"), "8", "train.chunk_size=3"])
    _run([str(tmp_path / "two"), "4", "train.chunk_size=3"], nproc=2)
    assert _losses(tmp_path / "chunked") == pytest.approx(_losses(tmp_path / "plain"), rel=1e-5)
    assert _losses(tmp_path / "two") == pytest.approx(_losses(tmp_path / "plain"), rel=1e-4)


def test_nan_gradient_stops_before_the_step_and_is_never_saved(tmp_path):
    proc = _run([str(tmp_path), "8", "nan_gradient_at=5", "train.save_every=2"], check=False)
    assert proc.returncode != 0 and "training diverged at step 6: grad_norm = nan" in proc.stderr
    ckpt = load_checkpoint(tmp_path / "checkpoints" / "latest.pt")
    assert ckpt["step"] < 6 and all(torch.isfinite(v).all() for v in ckpt["state_dict"].values())


def test_the_best_validation_step_is_what_gets_exported(tmp_path):
    _run([str(tmp_path), "8", "peak_eval=2", "train.eval_every=2"])  # evaluations at steps 2, 4, 6, 8
    best = load_checkpoint(tmp_path / "checkpoints" / "best.pt")
    latest = load_checkpoint(tmp_path / "checkpoints" / "latest.pt")
    exported = torch.load(tmp_path / "export" / "model.pt", weights_only=True)["state_dict"]
    assert best["step"] == 4 and latest["step"] == 8
    curve = latest["dev_curve"]  # every evaluated step's score, kept for the results record
    assert [point["step"] for point in curve] == [2, 4, 6, 8]
    assert max(curve, key=lambda point: point["accuracy"])["step"] == best["step"]
    assert all(torch.equal(exported[k], best["state_dict"][k]) for k in exported)
    assert not all(torch.equal(exported[k], latest["state_dict"][k]) for k in exported)


@pytest.mark.slow
def test_two_process_crash_resumes_to_the_same_weights_with_dropout(tmp_path):
    common = ["dropout=0.3", "train.save_every=2"]
    _run([str(tmp_path / "straight"), "4", *common], nproc=2)
    proc = _run([str(tmp_path / "crashed"), "4", *common, "fail_at=5"], nproc=2, check=False)
    assert proc.returncode != 0
    ckpt = load_checkpoint(tmp_path / "crashed" / "checkpoints" / "latest.pt")
    assert ckpt["step"] == 4 and len(ckpt["rng"]) == 2  # every rank's RNG state
    _run([str(tmp_path / "crashed"), "4", *common, "train.resume=latest"], nproc=2)
    a = load_checkpoint(tmp_path / "straight" / "checkpoints" / "latest.pt")["state_dict"]
    b = load_checkpoint(tmp_path / "crashed" / "checkpoints" / "latest.pt")["state_dict"]
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=1e-6, atol=1e-6)


@pytest.mark.slow
def test_a_stop_signal_saves_the_step_and_the_resumed_run_is_the_uninterrupted_one(tmp_path):
    common = ["dropout=0.3", "train.save_every=4", "train.steps=12"]
    _run([str(tmp_path / "straight"), "4", *common], nproc=2)
    stopped = _run([str(tmp_path / "stopped"), "4", *common, "signal_at=6"], nproc=2, check=False)
    assert stopped.returncode != 0 and "SIGTERM at step 7: checkpoint saved" in stopped.stderr
    assert load_checkpoint(tmp_path / "stopped" / "checkpoints" / "latest.pt")["step"] == 7  # not the step-4 save
    _run([str(tmp_path / "stopped"), "4", *common, "train.resume=latest"], nproc=2)
    assert _losses(tmp_path / "stopped") == pytest.approx(_losses(tmp_path / "straight"), rel=1e-6)
    a = load_checkpoint(tmp_path / "straight" / "checkpoints" / "latest.pt")["state_dict"]
    b = load_checkpoint(tmp_path / "stopped" / "checkpoints" / "latest.pt")["state_dict"]
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=1e-6, atol=1e-6)
