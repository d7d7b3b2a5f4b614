"""End-to-end runs of the image-text scripts on the CPU with the micro architecture.

Covers: two gloo processes equal one process with the doubled batch; a run killed with SIGKILL
resumes to the same weights as an uninterrupted one; shard training with evaluation; the real
CLIP-benchmark CLI on an exported model; bad shards and configs failing with a clear message.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import REPO, run_python, script_env

from clipmag.clip.model import load_clipmag
from clipmag.head_record import HeadRecord
from clipmag.results import read_results

MICRO = [
    "model.name=clipmag-micro",
    "data.embedded_train=512",
    "data.embedded_test=64",
    "data.embedded_per_class=4",
    "train.log_every=1",
    "train.tensorboard=false",
    "train.progress=false",
    "train.device=cpu",
    "optim.warmup_steps=0",
]
pytestmark = pytest.mark.slow


def train(out: Path, *args: str, nproc: int = 1, check: bool = True) -> subprocess.CompletedProcess:
    return run_python(
        REPO / "scripts" / "train_clip.py", [*MICRO, f"train.output_dir={out}", *args], nproc, check, timeout=180
    )


def weights(run: Path) -> dict[str, torch.Tensor]:
    return torch.load(run / "checkpoints" / "latest.pt", map_location="cpu", weights_only=False)["state_dict"]


def assert_same_weights(a: dict, b: dict, atol: float) -> None:
    assert a.keys() == b.keys()
    worst = max(float((a[k].float() - b[k].float()).abs().max()) for k in a)
    assert worst <= atol, f"largest weight difference {worst:g}"


def test_two_gloo_processes_equal_one_with_doubled_batch(tmp_path):
    common = ["--loss", "sym", "--norm", "learnable", "train.steps=3", "train.save_every=0"]
    train(tmp_path / "two", *common, "data.batch_size=8", nproc=2)
    one = train(tmp_path / "one", *common, "data.batch_size=16")
    assert "I->T R@1" in one.stdout and "T->I R@1" in one.stdout
    assert_same_weights(weights(tmp_path / "two"), weights(tmp_path / "one"), atol=2e-5)


def test_resume_after_sigkill_matches_uninterrupted_run(tmp_path):
    args = ["--loss", "i2t", "--norm", "qnorm", "train.steps=30", "train.save_every=3", "data.batch_size=16"]
    cmd = [
        sys.executable,
        str(REPO / "scripts" / "train_clip.py"),
        *MICRO,
        f"train.output_dir={tmp_path / 'killed'}",
        *args,
    ]
    proc = subprocess.Popen(cmd, cwd=REPO, env=script_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    latest = tmp_path / "killed" / "checkpoints" / "latest.pt"
    deadline = time.time() + 120
    while not latest.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    killed_while_running = proc.poll() is None
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert killed_while_running, "the run finished before it could be killed"
    step_at_kill = torch.load(latest, weights_only=False)["step"]
    assert step_at_kill < 30
    train(tmp_path / "killed", *args, "--resume", "latest")
    train(tmp_path / "straight", *args)
    assert_same_weights(weights(tmp_path / "killed"), weights(tmp_path / "straight"), atol=1e-6)


@pytest.fixture(scope="module")
def digit_shards(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("digits")
    run_python(
        REPO / "scripts" / "make_clip_shards.py",
        [
            "--embedded",
            "--output",
            str(out),
            "--embedded-train",
            "300",
            "--embedded-test",
            "100",
            "--embedded-per-class",
            "5",
            "--shard-size",
            "100",
        ],
        timeout=120,
    )
    return out


def test_shard_training_then_clip_benchmark_cli(tmp_path, digit_shards):
    run = tmp_path / "run"
    proc = train(
        run,
        "data.source=shards",
        f"data.train_shards={digit_shards}/train/shard-{{000000..000002}}.tar",
        f"data.val_shards={digit_shards}/test/shard-000000.tar",
        "data.batch_size=16",
        "train.steps=2",
        "--norm",
        "dnorm",
    )
    assert "I->T R@1" in proc.stdout
    results = read_results(run / "results.json")
    assert results["metrics"]["test"]["test_pairs"] == 100 and results["run"]["front_end"] == "clip"
    assert results["head"]["head"] == {"name": "dnorm"} and results["head"]["query_side"] == "image"
    from_checkpoint, _, _ = load_clipmag(run / "checkpoints" / "latest.pt")
    from_export, _, _ = load_clipmag(run / "export")
    assert from_checkpoint.head_record() == from_export.head_record() == HeadRecord.from_dict(results["head"])
    exported = from_export.state_dict()
    assert all(torch.equal(value, exported[key]) for key, value in from_checkpoint.state_dict().items())
    for task, name, extra in (
        ("zeroshot_retrieval", "digits_retrieval", ["--recall_k", "1", "5"]),
        ("zeroshot_classification", "digits_classification", []),
    ):
        out = tmp_path / f"cb_{name}.json"
        args = [
            "eval",
            "--model_type",
            "clipmag",
            "--model",
            "micro",
            "--pretrained",
            str(run / "export"),
            "--dataset",
            f"wds/{name}",
            "--dataset_root",
            f"{digit_shards}/wds/{{dataset}}",
            "--task",
            task,
            "--output",
            str(out),
            "--num_workers",
            "0",
            "--no_amp",
            "--batch_size",
            "64",
            *extra,
        ]
        bench = run_python(REPO / "scripts" / "eval_clip_benchmark.py", args, timeout=180)
        assert "cosine" in bench.stdout
        metrics = json.loads(out.read_text())["metrics"]
        key = "image_retrieval_recall@1" if task == "zeroshot_retrieval" else "acc1"
        assert 0.0 <= metrics[key] <= 1.0


def test_cli_reports_bad_shards_and_configs(tmp_path):
    (tmp_path / "broken.tar").write_bytes(b"\0garbage" * 100)
    proc = train(tmp_path / "bad", "data.source=shards", f"data.train_shards={tmp_path}/broken.tar", check=False)
    assert proc.returncode != 0 and "not a readable tar file" in proc.stderr
    proc = train(tmp_path / "bad", "--loss", "both-ways", check=False)
    assert proc.returncode != 0 and "objective" in proc.stderr and "Traceback" not in proc.stderr
