"""No silent head: an export whose ``clipmag_head.json`` is gone is read from its sentence-transformers
files (similarity, Router, Normalize / NormPower, pooling, prompts, lengths) and scores as before, or
is refused in one line that names the missing file and the ``--norm`` flag; never cosine by default.
"""

from __future__ import annotations

import json
import logging
import shutil

import pytest
import torch
from text_fixtures import minilm_path, save_tiny_exports, write_beir, write_tiny_bert

from clipmag.config.entry import run_entry_point
from clipmag.scoring.head_record import HEAD_FILE
from text_retrieval.evaluation.cli import main as eval_text
from text_retrieval.model.encoder import TextEncoder
from text_retrieval.model.st_config import HeadUnreadableError

QUERIES = ["how do I sort a list", "vitamin d and respiratory infections"]
DOCUMENTS = ["sorted(xs) returns a new sorted list", "Vitamin D deficiency and infection.", "short"]
HEADS = {
    "cosine": ("cosine", {}, "last"),
    "dot": ("dot", {}, "mean"),
    "qnorm": ("qnorm", {}, "cls"),
    "dnorm": ("dnorm", {}, "mean"),
    "learnable": ("learnable", {"gq": 0.2, "gd": 0.85}, "cls"),
    "learnable-equal": ("learnable", {"gq": 0.3, "gd": 0.3}, "mean"),
}


@pytest.fixture(scope="module")
def headless(tmp_path_factory):
    """Each head's export of one tiny BERT (``save_tiny_exports``, as test_st_export.py has them), its record removed:
    key -> (the encoder that wrote it, the folder)."""
    saved = save_tiny_exports(tmp_path_factory, HEADS)
    for _, folder in saved.values():
        (folder / HEAD_FILE).unlink()
    return saved


def _scores(encoder: TextEncoder) -> torch.Tensor:
    queries = torch.from_numpy(encoder.encode(QUERIES, "query", show_progress=False))
    documents = torch.from_numpy(encoder.encode(DOCUMENTS, "document", show_progress=False))
    return encoder.head.score(queries, documents)


@pytest.mark.parametrize("key", list(HEADS))
def test_an_export_without_its_record_is_read_from_its_sentence_transformers_files(headless, key):
    written, folder = headless[key]
    loaded = TextEncoder.from_pretrained(folder, precision="fp32")
    assert loaded.head.name == written.head.name
    assert loaded.head.gammas() == pytest.approx(written.head.gammas(), abs=1e-6)
    assert (loaded.pooling, loaded.query_prefix, loaded.document_prefix) == (written.pooling, "query: ", "passage: ")
    assert (loaded.query_max_length, loaded.document_max_length) == (12, 40)
    assert torch.allclose(_scores(loaded), _scores(written), atol=1e-5)


def _copy(folder, tmp_path):
    return shutil.copytree(folder, tmp_path / "copy" / "export")


def test_a_router_clipmag_cannot_reproduce_is_refused_in_one_line_unless_the_head_is_named(headless, tmp_path):
    folder = _copy(headless["qnorm"][1], tmp_path)
    config = folder / "1_Router" / "router_config.json"
    routed = json.loads(config.read_text())
    routed["types"]["query_2_Dense"] = "sentence_transformers.base.modules.dense.Dense"
    routed["structure"]["query"].append("query_2_Dense")
    config.write_text(json.dumps(routed))
    with pytest.raises(HeadUnreadableError) as refused:
        TextEncoder.from_pretrained(folder)
    message = str(refused.value)
    assert "\n" not in message and f"no {HEAD_FILE}" in message and "--norm" in message
    assert "1_Router/router_config.json" in message and "Dense" in message
    assert TextEncoder.from_pretrained(folder, norm="qnorm").head.name == "qnorm"  # named: loaded as asked


def test_a_similarity_no_head_computes_is_refused_by_the_command_line(headless, tmp_path, capsys):
    folder = _copy(headless["dot"][1], tmp_path)
    config = folder / "config_sentence_transformers.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "similarity_fn_name": "euclidean"}))
    data = write_beir(
        tmp_path / "beir", [{"_id": "d", "text": "a text"}], [{"_id": "q", "text": "text"}], [("q", "d", 1)]
    )
    argv = ["--model", str(folder), "--data", str(data), "--output", str(tmp_path / "eval"), "--quiet"]
    with pytest.raises(SystemExit) as exited:
        run_entry_point(eval_text, argv)
    err = capsys.readouterr().err
    assert exited.value.code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "similarity_fn_name 'euclidean'" in err and HEAD_FILE in err and "--norm" in err
    (record,) = eval_text([*argv, "--norm", "dot"])
    assert record["config"]["head"] == {"name": "dot"}


def test_headless_qnorm_export_is_evaluated_with_qnorm(headless, tmp_path):
    data = write_beir(
        tmp_path / "beir",
        [{"_id": f"d{i}", "text": d} for i, d in enumerate(DOCUMENTS)],
        [{"_id": f"q{i}", "text": q} for i, q in enumerate(QUERIES)],
        [("q0", "d0", 1), ("q1", "d1", 1)],
    )
    argv = ["--model", str(headless["qnorm"][1]), "--data", str(data), "--output", str(tmp_path / "eval")]
    (record,) = eval_text([*argv, "--quiet", "--precision", "fp32"])
    assert record["config"]["head"] == {"name": "qnorm"} and record["config"]["pooling"] == "cls"


def test_plain_sentence_transformers_model_is_cosine_and_a_plain_hf_model_says_so(tmp_path, caplog):
    minilm = TextEncoder.from_pretrained(minilm_path())  # no similarity_fn_name, a Normalize module
    assert (minilm.head.name, minilm.pooling, minilm.query_prefix) == ("cosine", "mean", "")
    plain = write_tiny_bert(tmp_path / "plain")  # no sentence-transformers files at all
    with caplog.at_level(logging.WARNING, logger="clipmag"):
        assert TextEncoder.from_pretrained(plain).head.name == "cosine"
    assert any("no head is declared; scoring with cosine" in r.getMessage() for r in caplog.records)
