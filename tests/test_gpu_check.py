"""The GPU readiness check (benchmarks/gpu_check.py): its arithmetic, and its CPU rehearsal end to end.

The rehearsal runs the same code as the GPU check - both trainers under torchrun with two gloo
ranks, the FLOP count, the loss parity runs and the SciFact evaluation - with fp32 on both sides
of the parity, so the losses must agree to the fp32 tolerance. SciFact is replaced by a tiny BEIR
folder whose queries are copies of documents, where the untuned model must score NDCG@10 = 1.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, script_env
from text_fixtures import write_beir

BENCHMARKS = REPO / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))

import gpu_figures  # noqa: E402
from gpu_model import without_dropout  # noqa: E402
from gpu_profiles import cpu_profile, gpu_profile, trainer_args  # noqa: E402


@pytest.mark.parametrize(
    ("name", "peak"),
    [
        ("NVIDIA H200", 989.0),
        ("NVIDIA GH200 480GB", 989.0),
        ("NVIDIA H100 80GB HBM3", 989.0),
        ("NVIDIA H100 PCIe", 756.0),
        ("NVIDIA H100 NVL", 835.0),
        ("NVIDIA A100-SXM4-80GB", 312.0),
        ("NVIDIA A100 80GB PCIe", 312.0),
        ("NVIDIA L4", 121.0),
        ("NVIDIA L40S", 362.0),
        ("NVIDIA A10", 125.0),
        ("NVIDIA A10G", None),
        ("Tesla V100-SXM2-16GB", None),
        ("NVIDIA L40", None),
    ],
)
def test_device_table(name, peak):
    assert gpu_figures.peak_tflops(name) == peak


def test_flop_arithmetic():
    # 4.945 GFLOP per sample at 100k samples/s is 494.5 TFLOP/s: half of one H200, a quarter of two
    assert gpu_figures.achieved_tflops(4.945e9, 1e5) == pytest.approx(494.5)
    assert gpu_figures.model_flops_utilisation(4.945e9, 1e5, 1, 989.0) == pytest.approx(0.5)
    assert gpu_figures.model_flops_utilisation(4.945e9, 1e5, 2, 989.0) == pytest.approx(0.25)
    assert gpu_figures.model_flops_utilisation(4.945e9, 1e5, 1, None) is None


def test_loss_tolerance():
    assert gpu_figures.relative_difference(1.02, 1.0) == pytest.approx(0.02)
    assert gpu_figures.relative_difference(0.5, 0.0) == 0.5  # absolute where the reference is 0
    assert gpu_figures.loss_check(20, 2.019, 2.0, "bf16")["passed"]
    failed = gpu_figures.loss_check(20, 2.021, 2.0, "bf16")
    assert not failed["passed"] and failed["relative_difference"] == pytest.approx(0.0105)
    assert gpu_figures.loss_check(1, 2.0001, 2.0, "fp32")["passed"]
    assert not gpu_figures.loss_check(1, 2.001, 2.0, "fp32")["passed"]
    with pytest.raises(ValueError, match="fp16"):
        gpu_figures.loss_tolerance("fp16")


def test_profiles_and_overrides(tmp_path):
    gpu = gpu_profile(2)
    assert gpu.throughput.text_batch * gpu.world_size == 256 and gpu.backend == "nccl" and gpu.parity.steps == 20
    assert gpu_profile(1).backend == "none (one rank)" and cpu_profile(2).backend == "gloo"
    args = trainer_args("text", gpu, gpu.parity, tmp_path / "out", tmp_path, "model-folder")
    assert "data.batch_size=16" in args and "train.precision=bf16" in args and "train.device=cuda" in args
    assert "model.name=model-folder" in args and "train.log_every=1" in args
    clip = trainer_args("clip", gpu, gpu.throughput, tmp_path / "out", tmp_path, "unused")
    assert "data.batch_size=1024" in clip and "train.steps=300" in clip
    assert not any(a.startswith("model.") for a in clip)  # the CLIP default architecture


def test_report_of_a_cpu_and_an_unknown_gpu():
    row = {"trainer": "text", "device": "cpu", "precision": "fp32", "world_size": 2, "backend": "gloo"}
    row |= {"global_batch": 16, "steps": 6, "samples_per_s": 20.0, "flops_per_sample": 2e9, "achieved_tflops": 4e-2}
    result = {"device": "Some CPU", "kind": "cpu", "torch": "2", "precision": "fp32", "peak_bf16_tflops": None}
    result |= {"throughput": [{**row, "mfu": None}], "loss_parity": [], "scifact": None, "errors": []}
    result |= {"passed": True, "seconds": 1.0}
    text = gpu_figures.report(result)
    assert "cpu" in text and "no MFU on the cpu" in text and text.splitlines()[3].split()[-1] == "-"
    unknown = gpu_figures.report({**result, "kind": "cuda", "device": "NVIDIA A10G"})
    assert "MFU unknown: no dense bf16 peak for NVIDIA A10G" in unknown


def test_dropout_free_copy(tmp_path):
    source = tmp_path / "model"
    source.mkdir()
    config = {"hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1, "classifier_dropout": None}
    (source / "config.json").write_text(json.dumps({**config, "hidden_size": 32}))
    (source / "weights.bin").write_bytes(b"w")
    copy = without_dropout(str(source), tmp_path / "copy")
    saved = json.loads((copy / "config.json").read_text())
    assert saved == {**config, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0, "hidden_size": 32}
    assert (copy / "weights.bin").read_bytes() == b"w" and (copy / "weights.bin").is_symlink()
    assert without_dropout(str(source), tmp_path / "copy") == copy  # built once
    with pytest.raises(FileNotFoundError, match="no config.json"):
        without_dropout(str(tmp_path / "missing"), tmp_path / "other")


def test_bad_input_is_one_clear_error(tmp_path):
    import gpu_check

    with pytest.raises(FileNotFoundError, match="--scifact"):
        gpu_check.main(["--scifact", str(tmp_path / "none")])
    with pytest.raises(gpu_check.CheckFailed, match="pass --scifact PATH"):  # recorded; the other checks still run
        gpu_check.scifact(tmp_path / "none", "model", cpu_profile(2), tmp_path, 0.6451, None)
    with pytest.raises(ValueError, match="--nproc 0"):
        gpu_check.choose_profile("cpu", 0)
    assert gpu_check.choose_profile("cpu", None)[0] == cpu_profile(2)


def test_time_limit_caps_every_run_by_what_is_left():
    import time

    import gpu_check

    assert gpu_check.TimeLimit(300, time.monotonic() + 1000).next_run("x") == 300
    assert 90 < gpu_check.TimeLimit(300, time.monotonic() + 100).next_run("x") <= 100
    with pytest.raises(gpu_check.CheckFailed, match="no time left for scripts/eval_text.py"):
        gpu_check.TimeLimit(300, time.monotonic() + 1).next_run("scripts/eval_text.py")


def _echo_set(folder: Path) -> Path:
    """A BEIR folder whose 4 queries are copies of 4 of its 8 documents."""
    texts = [
        "The mitochondrion produces most of the cell's chemical energy.",
        "Glaciers carve U-shaped valleys as they move downhill.",
        "Compilers translate source code into machine instructions.",
        "The violin has four strings tuned in perfect fifths.",
        "Tides are caused mainly by the gravitational pull of the moon.",
        "Bees communicate the location of flowers by dancing.",
        "A binary search halves the interval at every comparison.",
        "Volcanic soil is often rich in minerals and fertile.",
    ]
    corpus = [{"_id": f"d{i}", "title": "", "text": t} for i, t in enumerate(texts)]
    queries = [{"_id": f"q{i}", "text": texts[i]} for i in range(0, 8, 2)]
    return write_beir(folder, corpus, queries, [(f"q{i}", f"d{i}", 1) for i in range(0, 8, 2)])


@pytest.mark.slow
@pytest.mark.timeout(1200)  # seven trainer launches of two ranks each: 5 minutes on 2 busy cores
def test_cpu_rehearsal_end_to_end(tmp_path):
    output = tmp_path / "figures.json"
    args = ["--device", "cpu", "--nproc", "2", "--output", str(output), "--scifact", str(_echo_set(tmp_path / "echo"))]
    args += ["--budget", "1000"]
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / "gpu_check.py"), *args, "--scifact-expected", "1.0"],
        cwd=REPO,
        env=script_env(),
        capture_output=True,
        text=True,
        timeout=1100,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    figures = json.loads(output.read_text())
    assert figures["kind"] == "cpu" and figures["passed"] and figures["errors"] == []
    assert [r["trainer"] for r in figures["throughput"]] == ["text", "clip"]
    for row in figures["throughput"]:
        assert row["backend"] == "gloo" and row["world_size"] == 2 and row["mfu"] is None
        assert row["samples_per_s"] > 0 and row["flops_per_sample"] > 1e6 and row["windows"] == 2
    parity = figures["loss_parity"]
    assert [(r["trainer"], r["step"]) for r in parity] == [("text", 1), ("text", 3), ("clip", 1), ("clip", 3)]
    assert all(r["passed"] and r["relative_difference"] <= 1e-4 and r["loss"] > 0 for r in parity)
    assert figures["scifact"]["ndcg@10"] == pytest.approx(1.0) and figures["scifact"]["passed"]
    assert "no MFU on the cpu" in proc.stdout and "all checks passed" in proc.stdout
