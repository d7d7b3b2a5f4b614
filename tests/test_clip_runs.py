"""End-to-end runs of the image-text scripts on the CPU with the micro architecture.

Covers: two gloo processes equal one process with the doubled batch; a two-process run on shards
with augmentation, killed with SIGKILL, resumes by counts to the same weights as an uninterrupted
one; validation and test on their own multi-caption splits; the real CLIP-benchmark CLI on the
export agreeing with our cosine columns (--head cosine) and with our head columns (--head model);
bad shards and configs failing with a clear message.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from clip_fixtures import write_digit_shards
from conftest import REPO, run_python, script_env

from clipmag.results.record import read_results
from clipmag.scoring.head_record import HeadRecord
from image_text.model.loading import load_clipmag

MICRO = [
    "model.name=clipmag-micro",
    "data.bundled.train=512",
    "data.bundled.validation=32",
    "data.bundled.test=64",
    "data.bundled.per_class=4",
    "train.log_every=1",
    "train.tensorboard=false",
    "train.progress=false",
    "train.device=cpu",
    "train.precision=fp32",  # exact comparisons: bf16 autocast rounds differently per batch shape
    "optim.warmup_steps=0",
]
pytestmark = pytest.mark.slow


def train(out: Path, *args: str, nproc: int = 1, check: bool = True) -> subprocess.CompletedProcess:
    return run_python(
        REPO / "scripts" / "train_clip.py", [*MICRO, f"train.output_dir={out}", *args], nproc, check, timeout=180
    )


def weights(run: Path) -> dict[str, torch.Tensor]:
    return torch.load(run / "checkpoints" / "latest.pt", map_location="cpu", weights_only=True)["state_dict"]


def assert_same_weights(a: dict, b: dict, atol: float) -> None:
    assert a.keys() == b.keys()
    worst = max(float((a[k].float() - b[k].float()).abs().max()) for k in a)
    assert worst <= atol, f"largest weight difference {worst:g}"


def test_two_gloo_processes_equal_one_with_doubled_batch(tmp_path):
    common = ["--objective", "sym", "--norm", "learnable", "train.steps=3", "train.save_every=0"]
    train(tmp_path / "two", *common, "data.batch_size=8", nproc=2)
    one = train(tmp_path / "one", *common, "data.batch_size=16")
    assert "I->T R@1" in one.stdout and "T->I R@1" in one.stdout
    assert_same_weights(weights(tmp_path / "two"), weights(tmp_path / "one"), atol=2e-5)


def test_activation_checkpointing_recomputes_to_the_same_weights(tmp_path):
    common = ["--objective", "sym", "--norm", "dnorm", "train.steps=2", "train.save_every=0", "data.batch_size=8"]
    train(tmp_path / "stored", *common)
    train(tmp_path / "recomputed", *common, "train.gradient_checkpointing=true")
    assert_same_weights(weights(tmp_path / "recomputed"), weights(tmp_path / "stored"), atol=1e-6)


@pytest.fixture(scope="module")
def digit_shards(tmp_path_factory) -> Path:
    return write_digit_shards(tmp_path_factory.mktemp("digits"), 160, 24, 40, per_class=2, shard_size=20)


def shard_args(shards: Path) -> list[str]:
    return [f"data.{split}_shards={shards / split}" for split in ("train", "val", "test")]


RESUMED = ["--objective", "i2t", "--norm", "qnorm", "train.steps=24", "train.save_every=3", "data.batch_size=8"]


@pytest.fixture(scope="module")
def straight_run(tmp_path_factory, digit_shards) -> Path:
    """Two processes on shards with augmentation, uninterrupted; its export is the model under test."""
    run = tmp_path_factory.mktemp("straight")
    train(run, *shard_args(digit_shards), "data.augment=true", *RESUMED, nproc=2)
    return run


def test_two_process_shard_run_killed_and_resumed_by_counts_matches_uninterrupted(tmp_path, digit_shards, straight_run):
    """24 steps of 2 x 8 images cross two epochs of 160 images; augmentation is on."""
    out = tmp_path / "killed"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    cmd += [str(REPO / "scripts" / "train_clip.py"), *MICRO, f"train.output_dir={out}", *shard_args(digit_shards)]
    proc = subprocess.Popen(
        [*cmd, "data.augment=true", *RESUMED],
        cwd=REPO,
        env=script_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    latest = out / "checkpoints" / "latest.pt"
    deadline = time.time() + 150
    while not latest.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    killed_while_running = proc.poll() is None
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert killed_while_running, "the run finished before it could be killed"
    step_at_kill = torch.load(latest, weights_only=True)["step"]
    assert 0 < step_at_kill < 24
    train(out, *shard_args(digit_shards), "data.augment=true", *RESUMED, "--resume", "latest", nproc=2)
    assert_same_weights(weights(out), weights(straight_run), atol=1e-6)


def test_results_and_clip_benchmark_cli_agree_on_the_multi_caption_test_split(tmp_path, digit_shards, straight_run):
    results = read_results(straight_run / "results.json")
    ours = results["metrics"][digit_shards.name]  # named after the data
    assert (ours["n_images"], ours["n_texts"]) == (40, 200) and results["run"]["front_end"] == "clip"
    assert results["validation"]["n_images"] == 24  # validation ran on its own split
    assert results["head"]["head"] == {"name": "qnorm"} and results["head"]["query_side"] == "image"
    from_checkpoint, _, _ = load_clipmag(straight_run / "checkpoints" / "latest.pt")
    from_export, _, _ = load_clipmag(straight_run / "export")
    assert from_checkpoint.head_record() == from_export.head_record() == HeadRecord.from_dict(results["head"])
    from_run, _, _ = load_clipmag(straight_run)  # the run folder gives the model its results tested: the export
    assert_same_weights(from_run.state_dict(), from_export.state_dict(), atol=0.0)
    benchmark: dict[str, dict] = {"cosine": {}, "model": {}}
    for (task, name, extra), head in itertools.product(
        (
            ("zeroshot_retrieval", "digits_retrieval", ["--recall_k", "1", "5", "10"]),
            ("zeroshot_classification", "digits_classification", []),
        ),
        benchmark,
    ):
        out = tmp_path / f"cb_{name}_{head}.json"
        args = ["eval", "--model_type", "clipmag", "--model", "micro", "--pretrained", str(straight_run / "export")]
        args += ["--dataset", f"wds/{name}", "--dataset_root", f"{digit_shards}/wds/{{dataset}}", "--task", task]
        args += ["--output", str(out), "--num_workers", "0", "--no_amp", "--batch_size", "64", "--head", head, *extra]
        bench = run_python(REPO / "scripts" / "eval_clip_benchmark.py", args, timeout=180)
        assert f"scored with the head {head}" in bench.stdout
        benchmark[head].update(json.loads(out.read_text())["metrics"])
    for head, scoring in (("cosine", "cosine"), ("model", "head")):
        for k in (1, 5, 10):  # CLIP-benchmark's text retrieval is our I->T, its image retrieval our T->I
            assert abs(benchmark[head][f"text_retrieval_recall@{k}"] - ours[f"i2t_r{k}_{scoring}"]) <= 1e-6
            assert abs(benchmark[head][f"image_retrieval_recall@{k}"] - ours[f"t2i_r{k}_{scoring}"]) <= 1e-6
        assert 0.0 <= benchmark[head]["acc1"] <= 1.0
    assert benchmark["model"]["head"] == "qnorm (query side image)"


def test_cli_reports_bad_shards_and_configs(tmp_path):
    (tmp_path / "broken.tar").write_bytes(b"\0garbage" * 100)
    proc = train(tmp_path / "bad", f"data.train={tmp_path}/broken.tar", check=False)
    assert proc.returncode != 0 and "not a readable tar file" in proc.stderr
    proc = train(tmp_path / "bad", "--objective", "both-ways", check=False)
    assert proc.returncode != 0 and "objective" in proc.stderr and "Traceback" not in proc.stderr
