"""End-to-end runs with a locked image tower taken from another export (LiT) on the CPU, micro CLIP:
under SigLIP with every head (gradient caching, bf16) a run trains, resumes and exports, the locked
weights leave it bit for bit and the optimizer never holds them; an InfoNCE LiT run's export scores
under CLIP-benchmark (``--head model``) exactly as its run reported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from clip_fixtures import write_digit_shards
from safetensors.torch import load_file

from clipmag.results.record import read_results
from clipmag.scoring.head_config import HEAD_NAMES
from clipmag.scoring.head_record import HeadRecord
from clipmag.scoring.heads import build_head
from clipmag.scoring.losses import InfoNCE, SigLIP
from clipmag.train.checkpoint.resume_check import ResumeMismatch
from image_text.cli import main
from image_text.evaluation import benchmark
from image_text.model.architecture import build_open_clip
from image_text.model.clip_model import ClipMagModel
from image_text.model.config import ClipModelConfig
from image_text.model.export import export_open_clip
from image_text.model.loading import load_clipmag
from image_text.model.weights import WEIGHTS_FILE

pytestmark = pytest.mark.slow
COMMON = [
    "model.name=clipmag-micro",
    "data.batch_size=8",
    "optim.schedule=constant",  # so that a resume may raise the step count
    "optim.warmup_steps=0",
    "train.save_every=1",
    "train.eval_every=0",
    "train.tensorboard=false",
    "train.progress=false",
    "train.device=cpu",
]
BUNDLED = ["data.bundled.train=64", "data.bundled.validation=8", "data.bundled.test=8", "data.bundled.per_class=1"]


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """The export whose image tower the runs lock (weights no run's own seed gives)."""
    torch.manual_seed(5)
    clip = build_open_clip(ClipModelConfig(name="clipmag-micro"))[0]
    model = ClipMagModel(clip, build_head("cosine"), InfoNCE(scale=10.0), "image", "clipmag-micro")
    return export_open_clip(model, tmp_path_factory.mktemp("source") / "export")


def checkpoint(run: Path) -> dict:
    return torch.load(run / "checkpoints" / "latest.pt", map_location="cpu", weights_only=True)


@pytest.mark.parametrize("head", HEAD_NAMES)
def test_a_siglip_lit_run_trains_resumes_and_exports_under_every_head(tmp_path, source, head):
    run = tmp_path / "run"
    args = [*COMMON, *BUNDLED, "--siglip", "--lock-image", f"model.image_init={source}", "--norm", head]
    args += ["train.chunk_size=4", "train.precision=bf16", "--output", str(run)]
    main([*args, "train.steps=2"])
    main([*args, "train.steps=4", "--resume", "latest"])
    ckpt, locked = checkpoint(run), load_file(source / WEIGHTS_FILE)
    assert ckpt["step"] == 4
    visual = [k for k in locked if k.startswith("visual.")]
    assert visual and all(torch.equal(ckpt["state_dict"][k], locked[k]) for k in visual)  # bit for bit
    torch.manual_seed(0)  # the run's own start (train.seed 0) of the text tower, which trained
    start = build_open_clip(ClipModelConfig(name="clipmag-micro"))[0].state_dict()
    assert not torch.equal(ckpt["state_dict"]["text_projection"], start["text_projection"])
    trained = [k for k in ckpt["state_dict"] if not k.startswith("visual.")]  # text, scale, bias, gammas
    assert sum(len(g["params"]) for g in ckpt["optimizer"]["param_groups"]) == len(trained)
    assert len(ckpt["optimizer"]["state"]) == len(trained)
    assert float(ckpt["state_dict"]["logit_bias"]) != -10.0  # SigLIP's bias trained from open_clip's start
    results = read_results(run / "results.json")
    record = HeadRecord.from_dict(results["head"])
    assert (record.head_name, record.loss_kind, record.loss_direction) == (head, "siglip", None)
    assert HeadRecord.read(run / "export") == record
    model = load_clipmag(run / "export")[0]
    assert isinstance(model.loss, SigLIP) and model.head_record() == record


def test_a_lit_runs_export_scores_under_clip_benchmark_as_its_run_reported(tmp_path, source):
    digits = write_digit_shards(tmp_path / "digits", 32, 8, 20, per_class=2, shard_size=50)
    run = tmp_path / "lit"
    shards = [f"data.{split}_shards={digits / split}" for split in ("train", "val", "test")]
    args = [*COMMON, *shards, f"model.image_init={source}", "--objective", "i2t", "--norm", "qnorm"]
    args += ["train.steps=3", "train.precision=fp32", "--output", str(run)]
    main([*args, "--lock-image"])
    with pytest.raises(ResumeMismatch, match="lock_image is True there and False here"):
        main([*args, "--resume", "latest"])  # a resume cannot unlock the tower
    reported = read_results(run / "results.json")["metrics"][digits.name]
    out = tmp_path / "cb.json"
    args = ["eval", "--model_type", "clipmag", "--model", "lit", "--pretrained", str(run / "export")]
    args += ["--dataset", "wds/digits_retrieval", "--dataset_root", f"{digits}/wds/{{dataset}}"]
    args += ["--task", "zeroshot_retrieval", "--recall_k", "1", "5", "10", "--output", str(out)]
    benchmark.run_cli([*args, "--num_workers", "0", "--no_amp", "--quiet"])
    scored = json.loads(out.read_text())["metrics"]
    assert scored["head"] == "qnorm (query side image)"
    for k in (1, 5, 10):
        assert abs(scored[f"text_retrieval_recall@{k}"] - reported[f"i2t_r{k}_head"]) <= 1e-6
        assert abs(scored[f"image_retrieval_recall@{k}"] - reported[f"t2i_r{k}_head"]) <= 1e-6
    assert len(reported["per_query"]) == 20 + 20 * 5  # every test image and caption, for the report's tests
