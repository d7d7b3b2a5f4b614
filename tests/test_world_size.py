"""A run is the same run at any world size: every rank reads its slice of one global batch, so with
dropout off (``model.dropout=0``) a run stopped on two ranks resumes on one to the losses of the
uninterrupted run, and two ranks of batch b train as one process of batch 2b. With dropout on, a
resume on another number of ranks says in one line that its masks differ. The stored configs that
still carry the retired ``data.split_by_rank`` load."""

from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path

import pytest
import torch
from conftest import REPO, run_python, start_script
from text_fixtures import tiny_train_args, write_code_search_set, write_tiny_bert

from clipmag.config.build import build_config, to_dict
from clipmag.errors import ConfigError
from clipmag.runtime.logs import read_metrics
from clipmag.train.checkpoint.resume_check import config_identity
from clipmag.train.dropout import active_dropout, set_layer_dropout
from image_text.model.architecture import build_open_clip
from image_text.model.config import ClipModelConfig
from text_retrieval.config import TextConfig
from text_retrieval.model.encoder import TextEncoder

TRAIN_TEXT = REPO / "scripts" / "train_text.py"
WORKER = REPO / "tests" / "engine_worker.py"
SAME_STEPS = "no dropout, so the same batches and the same steps"
OTHER_MASKS = "dropout draws its masks per rank"


def _losses(run: Path) -> list[float]:
    return [r["loss"] for r in read_metrics(run / "metrics.jsonl", "train")]


# ---- the text trainer, with its defaults and dropout turned off by the key --------------------------
@pytest.fixture(scope="module")
def text_setup(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("world_size")
    write_code_search_set(root)
    write_tiny_bert(root / "bert")  # BERT's own dropout: 0.1 on hidden states and attention
    return root


def _text_args(root: Path, out: Path, batch: int, *extra: str) -> list[str]:
    settings = ("model.dropout=0", "train.precision=fp32", "train.steps=30", "train.eval_every=0", "train.log_every=1")
    return tiny_train_args(root / "bert", root, out, *settings, f"data.batch_size={batch}", *extra)


def _stopped_after_first_checkpoint(args: list[str], out: Path) -> str:
    """Run on two ranks until its first checkpoint is written, then send it SIGTERM as a scheduler
    would: it saves the step it reaches and stops. Returns its stderr."""
    proc = start_script(TRAIN_TEXT, args, nproc=2)
    latest, deadline = out / "checkpoints" / "latest.pt", time.time() + 300
    while not latest.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    return err


@pytest.mark.slow
def test_text_run_stopped_on_two_ranks_resumes_on_one_to_the_uninterrupted_losses(text_setup, tmp_path):
    run_python(TRAIN_TEXT, _text_args(text_setup, tmp_path / "one", 16))
    uninterrupted = _losses(tmp_path / "one")
    assert len(uninterrupted) == 30
    stopped = tmp_path / "stopped"
    err = _stopped_after_first_checkpoint(_text_args(text_setup, stopped, 8), stopped)
    assert "checkpoint saved; rerun with train.resume=latest" in err, err[-3000:]
    on_two_ranks = _losses(stopped)
    assert 2 <= len(on_two_ranks) < 30
    assert on_two_ranks == pytest.approx(uninterrupted[: len(on_two_ranks)], abs=1e-6)  # two ranks of 8 = one of 16
    resumed = run_python(TRAIN_TEXT, _text_args(text_setup, stopped, 16, "train.resume=latest"))
    assert f"resuming on 1 rank(s) a checkpoint of 2: {SAME_STEPS}" in resumed.stderr
    # Two ranks differ from one only in the all-reduce's float32 summation order, whose last-bit
    # rounding compounds over the steps (about 1e-6 by step 15 on some CPUs' kernels); a wrong data
    # order, RNG state or optimizer state would move the losses by 1e-2 and more.
    assert _losses(stopped) == pytest.approx(uninterrupted, rel=1e-5)


# ---- the generic loop: what a resume on another number of ranks says --------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("dropout", [0.0, 0.3])
def test_a_resume_on_another_world_size_says_whether_dropout_changes_it(tmp_path, dropout):
    common = [f"dropout={dropout}", "train.save_every=4", "train.steps=12"]
    run_python(WORKER, [str(tmp_path / "one"), "8", *common])
    stopped = run_python(WORKER, [str(tmp_path / "two"), "4", *common, "signal_at=6"], nproc=2, check=False)
    assert "SIGTERM at step 7: checkpoint saved" in stopped.stderr
    resumed = run_python(WORKER, [str(tmp_path / "two"), "8", *common, "train.resume=latest"])
    warned = [line for line in resumed.stderr.splitlines() if OTHER_MASKS in line]
    if dropout:
        assert len(warned) == 1 and "a checkpoint of 2" in warned[0] and "query_encoder.2 (p=0.3)" in warned[0]
        assert _losses(tmp_path / "two")[-1] != pytest.approx(_losses(tmp_path / "one")[-1], abs=1e-6)
    else:
        assert warned == []
        assert _losses(tmp_path / "two") == pytest.approx(_losses(tmp_path / "one"), rel=1e-6)  # losses near 8


# ---- the keys -------------------------------------------------------------------------------------
def test_a_stored_config_with_the_retired_split_by_rank_key_loads(caplog):
    stored = REPO / "results" / "hard_negatives" / "scifact" / "default" / "qnorm" / "seed1" / "config.yaml"
    assert "split_by_rank: true" in stored.read_text()
    with caplog.at_level(logging.WARNING, logger="clipmag"):
        cfg = build_config(TextConfig, stored)
    warned = [r.getMessage() for r in caplog.records]
    retired = [w for w in warned if "key 'data.split_by_rank' is no longer read" in w]
    # its keys and values of older spellings (objective=infonce is objective=retrieval now)
    renamed = [w for w in warned if "is deprecated, it is now" in w or "is the old spelling, it is now" in w]
    assert any("'data.embedded' is deprecated, it is now 'data.bundled'" in w for w in renamed)
    assert len(retired) == 1 and len(warned) == 1 + len(renamed) == len(set(warned))  # one line each, nothing else
    assert cfg.data.batch_size == 16 and "split_by_rank" not in to_dict(cfg)["data"]


def test_text_dropout_key_sets_every_dropout_of_the_config(text_setup):
    bert = text_setup / "bert"
    own = TextEncoder.from_pretrained(bert).model
    assert own.config.hidden_dropout_prob == 0.1 and len(active_dropout(own)) > 0
    off = TextEncoder.from_pretrained(bert, dropout=0.0).model
    assert active_dropout(off) == [] and off.config.attention_probs_dropout_prob == 0.0
    more = TextEncoder.from_pretrained(bert, dropout=0.25, random_init_seed=0).model
    assert {p for p in (more.config.hidden_dropout_prob, more.config.attention_probs_dropout_prob)} == {0.25}
    assert all("p=0.25" in layer for layer in active_dropout(more))


def test_a_decoder_attention_dropout_kept_as_a_number_is_seen_and_set():
    from transformers import Qwen2Config, Qwen2Model

    sizes = dict(vocab_size=50, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2)
    decoder = Qwen2Model(Qwen2Config(**sizes, num_key_value_heads=1, attention_dropout=0.1))
    assert active_dropout(decoder) == ["layers.0.self_attn (p=0.1)"]
    set_layer_dropout(decoder, 0.0, "qwen2")
    assert decoder.layers[0].self_attn.attention_dropout == 0.0


def test_clip_dropout_key_sets_both_towers_and_refuses_what_it_cannot_turn_off(tmp_path):
    model = build_open_clip(ClipModelConfig(name="clipmag-micro", dropout=0.1))[0]
    towers = {layer.split(".")[0] for layer in active_dropout(model)}
    assert towers == {"visual", "transformer"}  # the image tower and the text tower
    assert active_dropout(build_open_clip(ClipModelConfig(name="clipmag-micro"))[0]) == []  # open_clip's own: none
    architecture = REPO / "configs" / "clip" / "models" / "clipmag-micro.json"
    patched = tmp_path / "micro-patch-dropout.json"
    patched.write_text(architecture.read_text().replace('"patch_size"', '"patch_dropout": 0.5, "patch_size"'))
    with pytest.raises(ConfigError, match=r"model.dropout=0: .* still drops at random \(visual.patch_dropout"):
        build_open_clip(ClipModelConfig(name=str(patched), dropout=0.0))
    with pytest.raises(ConfigError, match="has no dropout layer to set"):
        set_layer_dropout(torch.nn.Linear(2, 2), 0.1, "a linear layer")


def test_dropout_is_part_of_what_a_resume_must_match():
    assert config_identity({"model": {"name": "x", "dropout": 0.0}})["model.dropout"] == 0.0
    assert "model.dropout" not in config_identity({"model": {"name": "x"}})  # a checkpoint from before the key
