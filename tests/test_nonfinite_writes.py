"""Nothing non-finite is written: the text and CLIP exports, the served index and the training
checkpoints refuse weights (or embeddings) holding inf or nan in one line naming the tensor (and,
in training, the step), and a stopped run names the checkpoint that remains, or says there is none."""

from __future__ import annotations

import pytest
import torch
from conftest import REPO, run_python
from text_fixtures import tiny_train_args, write_code_search_set, write_tiny_bert
from transformers import AutoModel, AutoTokenizer

from clipmag.storage.finite import NonFiniteWeights
from image_text.model.weights import write_weights
from text_retrieval.model.encoder import TextEncoder
from text_retrieval.serving.cli import main as index_main

TRAIN = REPO / "scripts" / "train_text.py"


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("nonfinite")
    write_tiny_bert(root / "bert")
    write_code_search_set(root)
    return root


def _poison(model: torch.nn.Module) -> str:
    """Set one weight of ``model`` to nan, as a diverged step would; returns its name."""
    name, parameter = next(iter(model.named_parameters()))
    with torch.no_grad():
        parameter.view(-1)[0] = float("nan")
    return name


def test_a_text_export_of_nan_weights_is_refused_before_its_folder_exists(root, tmp_path):
    encoder = TextEncoder.from_pretrained(str(root / "bert"), norm="qnorm", precision="fp32")
    name = _poison(encoder.model)
    with pytest.raises(NonFiniteWeights, match=f"export: not written: tensor '{name}' holds inf or nan"):
        encoder.save_pretrained(tmp_path / "export")
    assert not (tmp_path / "export").exists()


def test_clip_weights_holding_inf_are_refused(tmp_path):
    tower = torch.nn.Linear(4, 3)
    state = {**tower.state_dict(), "logit_scale": torch.tensor(float("inf"))}
    with pytest.raises(NonFiniteWeights, match="tensor 'logit_scale' holds inf or nan"):
        write_weights(state, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_served_index_of_a_model_with_nan_weights_is_refused(root, tmp_path):
    """A model folder written by Hugging Face itself (not by clipmag) with a nan weight: its embeddings
    are nan, and clipmag-index names the first document and writes nothing."""
    model = AutoModel.from_pretrained(root / "bert")
    _poison(model)
    model.save_pretrained(tmp_path / "broken")
    AutoTokenizer.from_pretrained(root / "bert").save_pretrained(tmp_path / "broken")
    output = tmp_path / "index"
    argv = ["build", "--model", str(tmp_path / "broken"), "--corpus", str(root / "beir"), "--output", str(output)]
    with pytest.raises(NonFiniteWeights, match=r"index: not written: the embedding of document '.+' holds inf or nan"):
        index_main([*argv, "--precision", "fp32", "--quiet"])
    assert not output.exists() and not output.with_name("index.partial").exists()


def _last_line(proc) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc.stderr.strip().splitlines()[-1]


@pytest.mark.slow
def test_a_step_that_makes_the_weights_inf_writes_no_checkpoint(root, tmp_path):
    """A learning rate at the edge of float range: the first step's weights overflow; the run stops in
    one line naming the step and the weight, and no checkpoint or export holds them."""
    args = tiny_train_args(root / "bert", root, tmp_path / "run", "train.steps=1", "optim.lr=1e308")
    proc = run_python(TRAIN, args, check=False)
    line = _last_line(proc)
    assert proc.returncode == 2 and line.startswith("error: step 1: weight '") and "holds inf or nan" in line
    assert "the run has no complete checkpoint yet" in line
    assert not (tmp_path / "run" / "checkpoints" / "latest.pt").exists()
    assert not (tmp_path / "run" / "export").exists()


@pytest.mark.slow
def test_a_diverged_run_names_the_checkpoint_that_remains_or_says_there_is_none(root, tmp_path):
    run = tmp_path / "run"
    constant = ["optim.schedule=constant", "train.eval_every=0"]
    fresh = run_python(TRAIN, tiny_train_args(root / "bert", root, run, "train.max_loss=1e-9", *constant), check=False)
    assert "training diverged at step 1" in _last_line(fresh)
    assert "the run has no complete checkpoint yet" in _last_line(fresh)
    run_python(TRAIN, tiny_train_args(root / "bert", root, run, "train.steps=2", "train.overwrite=true", *constant))
    resumed = tiny_train_args(root / "bert", root, run, "--resume", "latest", "train.max_loss=1e-9", *constant)
    line = _last_line(run_python(TRAIN, resumed, check=False))
    latest = run / "checkpoints" / "latest.pt"
    assert "training diverged at step 3" in line and f"{latest} (step 2), is intact" in line
    assert latest.is_file()


def test_a_head_record_or_checkpoint_holding_an_inf_number_is_not_written(tmp_path):
    """Not only tensors: a learned scale that reached inf in a head record, or any number of a
    checkpoint's state, is refused before the file is opened, naming where it sits."""
    from clipmag.scoring.head_record import HEAD_FILE, HeadRecord
    from clipmag.train.checkpoint.files import atomic_save

    record = HeadRecord(head={"name": "cosine"}, scale=float("inf"))
    with pytest.raises(NonFiniteWeights, match=f"{HEAD_FILE}: not written: value 'scale' holds inf or nan"):
        record.write(tmp_path)
    target = tmp_path / "checkpoints" / "latest.pt"
    state = {"state_dict": {"w": torch.zeros(2)}, "head": record.to_dict(), "dev_curve": [{"step": 1, "ndcg": 0.5}]}
    with pytest.raises(NonFiniteWeights, match=r"latest.pt: not written: value 'head.scale' holds inf or nan"):
        atomic_save(state, target)
    assert not (tmp_path / HEAD_FILE).exists() and not target.exists()
