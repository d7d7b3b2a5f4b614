"""The text trainer end to end on a tiny BERT: runs, exports, resumes after SIGKILL, and two gloo
processes match one process with the doubled batch; bad input fails with a clear message."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import REPO, run_python, script_env
from text_fixtures import minilm_path, tiny_train_args, write_code_search_set

from clipmag.results.record import read_results
from clipmag.runtime.logs import read_metrics

SCRIPT = str(REPO / "scripts" / "train_text.py")
SIDES = ("query", "document")


@pytest.fixture(scope="module")
def tiny_setup(tmp_path_factory):
    """A 2-layer BERT with MiniLM's tokenizer, real stdlib code-search pairs as shards and a BEIR set."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    root = tmp_path_factory.mktemp("text_train")
    tokenizer = AutoTokenizer.from_pretrained(minilm_path())
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    BertModel(config).save_pretrained(root / "tiny")
    tokenizer.save_pretrained(root / "tiny")
    write_code_search_set(root)
    return root


def _args(root: Path, out: Path, *extra: str) -> list[str]:
    return tiny_train_args(root / "tiny", root, out, *extra)


def _run(args: list[str], nproc: int = 1, check: bool = True) -> subprocess.CompletedProcess:
    return run_python(SCRIPT, args, nproc, check)


def _losses(out: Path) -> list[float]:
    return [r["loss"] for r in read_metrics(out / "metrics.jsonl", "train")]


def test_train_evaluate_export_and_reload(tiny_setup, tmp_path):
    out = tmp_path / "run"
    proc = _run(_args(tiny_setup, out, "--norm", "learnable", "optim.gamma_lr=0.05"))
    assert "NDCG@10" in proc.stdout and "MRR@10" in proc.stdout and "Recall@100" in proc.stdout
    results = read_results(out / "results.json")
    head = results["head"]  # the whole head record, learned gammas included
    assert head["head"]["name"] == "learnable" and head["head"]["gq"] != 0.5 and head["loss_direction"] == "q2d"
    assert head["pooling"] == "mean" and head["scale"] == pytest.approx(20.0)
    assert results["run"]["front_end"] == "text" and results["checkpoint"]["path"].endswith("export")
    beir = results["metrics"]["beir"]
    assert 0.0 <= beir["NDCG@10"] <= 1.0 and {k for row in beir["per_query"].values() for k in row} == {"NDCG@10"}
    assert (out / "checkpoints" / "best.pt").is_file() and (out / "config.yaml").is_file()
    head_file = json.loads((out / "export" / "clipmag_head.json").read_text())
    assert head_file == head
    card = (out / "export" / "README.md").read_text()  # completed by the run driver once tested
    assert f"| beir | NDCG@10 {results['metrics']['beir']['NDCG@10']:.4f}" in card and "| training data |" in card
    record = read_metrics(out / "metrics.jsonl", "train")[0]
    assert {
        "loss",
        "lr",
        "gamma_q",
        "gamma_d",
        "q_norm_mean",
        "q_norm_cv",
        "d_norm_mean",
        "d_norm_cv",
        "effective_temperature",
        "samples_per_s",
    } <= set(record)
    assert any(r["kind"] == "eval" and "NDCG@10" in r for r in read_metrics(out / "metrics.jsonl"))
    from sentence_transformers import SentenceTransformer

    from text_retrieval.model.encoder import TextEncoder

    texts = ["def add(a, b): return a + b", "sum two numbers"]
    export = TextEncoder.from_pretrained(out / "export", precision="fp32")  # sentence-transformers runs fp32
    ours = export.head.score(*(torch.from_numpy(export.encode(texts, s, show_progress=False)) for s in SIDES))
    st = SentenceTransformer(str(out / "export"), device="cpu", trust_remote_code=True)  # the learnable head's module
    theirs = st.similarity(st.encode_query(texts), st.encode_document(texts))
    assert ours.detach().numpy() == pytest.approx(theirs.numpy(), abs=1e-4)
    from text_retrieval.evaluation.pipeline import evaluate_paths

    beir = tiny_setup / "beir"
    (as_trained,) = evaluate_paths([str(out / "export")], [beir], tmp_path / "eval", show_progress=False)
    (overridden,) = evaluate_paths([str(out / "export")], [beir], tmp_path / "eval", norm="dnorm", show_progress=False)
    assert as_trained["config"]["head"] == head["head"] and overridden["config"]["head"] == {"name": "dnorm"}
    assert as_trained["diagnostics"]["gamma_q"] == pytest.approx(head["head"]["gq"])


@pytest.mark.slow
def test_two_processes_match_one_process_with_doubled_batch(tiny_setup, tmp_path):
    common = ("train.eval_every=0",)
    _run(_args(tiny_setup, tmp_path / "one", *common))
    _run(_args(tiny_setup, tmp_path / "two", *common, "data.batch_size=4"), nproc=2)
    assert _losses(tmp_path / "two") == pytest.approx(_losses(tmp_path / "one"), rel=1e-3)
    one = json.loads((tmp_path / "one" / "results.json").read_text())["metrics"]["beir"]["NDCG@10"]
    two = json.loads((tmp_path / "two" / "results.json").read_text())["metrics"]["beir"]["NDCG@10"]
    assert two == pytest.approx(one, abs=1e-3)


@pytest.mark.slow
def test_sigkill_then_resume_matches_uninterrupted_run(tiny_setup, tmp_path):
    steps = ("train.steps=30", "train.save_every=3", "train.eval_every=0")
    _run(_args(tiny_setup, tmp_path / "full", *steps))
    killed = tmp_path / "killed"
    proc = subprocess.Popen(
        [sys.executable, SCRIPT, *_args(tiny_setup, killed, *steps)],
        cwd=REPO,
        env=script_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    latest = killed / "checkpoints" / "latest.pt"
    deadline = time.time() + 300
    while not latest.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert latest.exists(), "no checkpoint was written before the kill"
    _run(_args(tiny_setup, killed, *steps, "--resume", "latest"))
    assert _losses(killed) == pytest.approx(_losses(tmp_path / "full"), rel=1e-5)
    full = json.loads((tmp_path / "full" / "results.json").read_text())["metrics"]["beir"]
    again = json.loads((killed / "results.json").read_text())["metrics"]["beir"]
    assert again["NDCG@10"] == pytest.approx(full["NDCG@10"], abs=1e-6)


def test_validation_is_logged_only_when_it_has_metrics(tiny_setup, tmp_path):
    """A run without validation sets (configs/text/default.yaml) evaluates to no metrics: it logs no
    empty ``eval:`` line; with a validation set the line names its metrics."""
    bare = _run(_args(tiny_setup, tmp_path / "bare", "data.validation=[]", "train.steps=3"))
    validated = _run(_args(tiny_setup, tmp_path / "validated", "train.steps=3"))
    assert "step 3/3 loss" in bare.stderr and " eval:" not in bare.stderr + bare.stdout
    (line,) = [row for row in validated.stderr.splitlines() if "step 3 eval: " in row]
    assert "NDCG@10 " in line


@pytest.mark.parametrize(
    "extra, message",
    [
        (["data.batchsize=8"], "unknown key 'data.batchsize'; valid keys of 'data'"),
        (["--norm", "cosin"], "key 'head.name' expects one of 'cosine'"),
        (["--resume", "/no/such/checkpoint.pt"], "train.resume: checkpoint not found: /no/such/checkpoint.pt"),
    ],
)
def test_bad_input_fails_before_training(tiny_setup, tmp_path, extra, message):
    proc = _run(_args(tiny_setup, tmp_path / "bad", *extra), check=False)
    assert proc.returncode != 0
    assert message in proc.stderr
    assert not (tmp_path / "bad" / "checkpoints").exists()


@pytest.mark.slow
def test_bad_shards_fail_clearly(tiny_setup, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = _run(_args(tiny_setup, tmp_path / "a", f"data.train={empty}"), check=False)
    assert proc.returncode != 0 and str(empty) in proc.stderr and "shard" in proc.stderr
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    for shard in (tiny_setup / "shards").iterdir():
        (corrupt / shard.name).write_bytes(shard.read_bytes())
    (corrupt / "shard-000001.tar").write_bytes(b"\x00garbage" * 100)
    proc = _run(_args(tiny_setup, tmp_path / "b", f"data.train={corrupt}"), check=False)
    assert proc.returncode != 0 and "shard-000001.tar" in proc.stderr
    proc = _run(_args(tiny_setup, tmp_path / "c", f"data.train={corrupt}", "data.skip_corrupt=true", "train.steps=2"))
    assert "skipped 1 of 4 shards" in proc.stderr


def test_a_batch_larger_than_the_training_set_is_refused(tiny_setup, tmp_path):
    from text_retrieval.cli import main

    with pytest.raises(
        ValueError, match=r"40 training pairs are fewer than one global batch of 64 \(data.batch_size=64"
    ):
        main(_args(tiny_setup, tmp_path / "big", "data.batch_size=64"))


def test_a_learned_scale_trains_and_the_tested_checkpoint_is_the_best_on_dev(tiny_setup, tmp_path):
    """CLIP's trainable logit scale under any head, and results.json's record of the dev choice."""
    out = tmp_path / "run"
    _run(_args(tiny_setup, out, "--norm", "qnorm", "loss.learnable_scale=true", "optim.scale_lr=0.1"))
    results = read_results(out / "results.json")
    assert results["head"]["scale"] != pytest.approx(20.0) and 1.0 <= results["head"]["scale"] <= 100.0
    checkpoint = results["checkpoint"]
    assert checkpoint["selection"] == "best" and "highest validation NDCG@10" in checkpoint["rule"]
    curve = checkpoint["dev_curve"]
    assert [point["step"] for point in curve] == [3, 6]  # every eval_every steps and at the end
    assert checkpoint["step"] == max(curve, key=lambda point: point["NDCG@10"])["step"]
    assert checkpoint["value"] == max(point["NDCG@10"] for point in curve)
