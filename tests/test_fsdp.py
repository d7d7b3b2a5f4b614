"""``train.strategy=fsdp``: the steps of DDP with the weights, gradients and AdamW state sharded.

Tiny BERT and Qwen2 models (``model.dropout=0``, so runs on other numbers of ranks are the same) train on
two gloo ranks under torchrun in fp32: every logged loss equals DDP's to 1e-5, with gradient
accumulation, gradient caching, a learnable head trained in both directions, a decoder with a dnorm
head in the document-to-query direction and activation checkpointing. A sharded checkpoint written
on two ranks resumes on one and on two to the uninterrupted losses, and the export (written whole)
scores what the DDP run's does; without a final export, the whole copy rank 0 tests scores the same.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from conftest import REPO, run_python
from text_fixtures import tiny_train_args, write_code_search_set, write_tiny_bert, write_tiny_decoder

from clipmag.config.build import build_config
from clipmag.errors import ConfigError
from clipmag.results.record import read_results
from clipmag.runtime.logs import read_metrics
from clipmag.train import sharding
from clipmag.train.loop_config import TrainLoopConfig

TRAIN = REPO / "scripts" / "train_text.py"
EXACT = ("train.precision=fp32", "optim.schedule=constant", "train.save_every=3", "model.dropout=0")
BERT_STEP = ("--norm", "learnable", "loss.direction=both", "train.grad_accum=2")
DECODER_STEP = ("--norm", "dnorm", "loss.direction=d2q", "model.pooling=last", "train.gradient_checkpointing=true")


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("fsdp")
    samples = write_code_search_set(root)
    write_tiny_bert(root / "bert")  # BERT's own dropout, turned off by model.dropout=0
    write_tiny_decoder(root / "decoder", samples)
    return root


def _train(models: Path, model: str, out: Path, *extra: str, nproc: int = 2) -> list[float]:
    run_python(TRAIN, tiny_train_args(models / model, models, out, *EXACT, *extra), nproc=nproc)
    return [r["loss"] for r in read_metrics(out / "metrics.jsonl", "train")]


def _ndcg(run: Path) -> float:
    return read_results(run / "results.json")["metrics"]["beir"]["NDCG@10"]


@pytest.mark.slow
def test_fsdp_steps_equal_ddp_and_resume_on_other_ranks(models, tmp_path):
    ddp = _train(models, "bert", tmp_path / "ddp", *BERT_STEP)
    fsdp = _train(models, "bert", tmp_path / "fsdp", *BERT_STEP, "train.strategy=fsdp")
    assert len(ddp) == 6
    assert fsdp == pytest.approx(ddp, abs=1e-5)
    assert _ndcg(tmp_path / "fsdp") == pytest.approx(_ndcg(tmp_path / "ddp"), abs=1e-4)  # the whole export
    checkpoints = tmp_path / "fsdp" / "checkpoints"
    assert sharding.latest_sharded(checkpoints) == checkpoints / "sharded-step00000006"
    assert not (checkpoints / "latest.pt").exists()

    half = tmp_path / "half"  # three steps with gradient caching, saved on two ranks
    cached = _train(models, "bert", half, *BERT_STEP, "train.strategy=fsdp", "train.chunk_size=4", "train.steps=3")
    assert cached == pytest.approx(ddp[:3], abs=1e-5)
    for nproc, batch in ((1, 16), (2, 8)):  # the same global batch of 16 rows
        resumed = tmp_path / f"resumed-on-{nproc}"
        shutil.copytree(half, resumed)
        settings = (*BERT_STEP, "train.strategy=fsdp", f"data.batch_size={batch}", "train.resume=latest")
        assert _train(models, "bert", resumed, *settings, nproc=nproc) == pytest.approx(fsdp, abs=1e-5)


@pytest.mark.slow
def test_fsdp_decoder_equals_ddp(models, tmp_path):
    ddp = _train(models, "decoder", tmp_path / "ddp", *DECODER_STEP)
    fsdp = _train(models, "decoder", tmp_path / "fsdp", *DECODER_STEP, "train.strategy=fsdp")
    assert fsdp == pytest.approx(ddp, abs=1e-5)


@pytest.mark.slow
def test_fsdp_without_a_final_export_tests_the_encoder_an_export_would_hold(models, tmp_path):
    """``train.export_final=false``: rank 0 tests its whole copy of the trained model, scored as the
    export would be, and gets what a run of one process on the same global batch gets from its export."""
    _train(models, "bert", tmp_path / "fsdp", *BERT_STEP, "train.strategy=fsdp", "train.export_final=false")
    _train(models, "bert", tmp_path / "one", *BERT_STEP, "data.batch_size=16", nproc=1)
    fsdp, one = (read_results(tmp_path / run / "results.json") for run in ("fsdp", "one"))
    assert not (tmp_path / "fsdp" / "export").exists() and (tmp_path / "one" / "export").is_dir()
    assert fsdp["checkpoint"]["step"] == one["checkpoint"]["step"]
    assert fsdp["metrics"]["beir"]["NDCG@10"] == pytest.approx(one["metrics"]["beir"]["NDCG@10"], abs=1e-4)
    gammas = [(run["head"]["head"]["gq"], run["head"]["head"]["gd"]) for run in (fsdp, one)]
    assert gammas[0] == pytest.approx(gammas[1], abs=1e-5)  # the learnable head's, trained


def test_shard_units_are_the_blocks_a_model_names(models):
    from transformers import AutoModel

    bert, decoder = AutoModel.from_pretrained(models / "bert"), AutoModel.from_pretrained(models / "decoder")
    assert {type(m).__name__ for m in sharding.shard_units(bert)} == {"BertEmbeddings", "BertLayer"}
    assert len(sharding.shard_units(decoder)) == 2 and sharding.outermost_pretrained(decoder) == [decoder]
    with pytest.raises(ValueError, match="no block to shard"):
        sharding.shard_model(torch.nn.Linear(2, 2), None)


def test_fsdp_refuses_fp16():
    with pytest.raises(ConfigError, match="train.strategy=fsdp trains in bf16 or fp32"):
        build_config(TrainLoopConfig, overrides=["strategy=fsdp", "precision=fp16"])


def test_an_unfinished_sharded_save_is_not_the_latest(tmp_path):
    for step in (3, 6):
        (tmp_path / f"sharded-step{step:08d}").mkdir()
    (tmp_path / "sharded-step00000003" / sharding.TRAINER_FILE).write_bytes(b"x")
    assert sharding.latest_sharded(tmp_path) == tmp_path / "sharded-step00000003"  # step 6 was killed mid-save
