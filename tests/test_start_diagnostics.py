"""A start's diagnostics before fine-tuning, per test set, from one command: norm statistics of each
side, Cohen's d of document norms and the Fisher predictor, for a pretrained or a random start."""

from __future__ import annotations

import json

import numpy as np
import pytest
from text_fixtures import write_code_search_set, write_tiny_bert

from clipmag.errors import UserError
from clipmag.scoring.diagnostics import document_norm_effect, norm_stats, row_norms
from text_retrieval.data.loaders import load_beir
from text_retrieval.model.encoder import TextEncoder
from text_retrieval.predict.start_diagnostics import judged_pairs, main, read_evaluation


@pytest.fixture(scope="module")
def start_setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("starts")
    write_code_search_set(root)
    write_tiny_bert(root / "bert")
    return root


def _run(root, out, *extra):
    args = ["--model", str(root / "bert"), "--data", str(root / "beir"), "--output", str(out), "--n-pairs", "6"]
    return main([*args, "model.query_max_length=16", "model.document_max_length=32", *extra])


def test_judged_pairs_take_one_relevant_document_per_query_in_a_seeded_order():
    qrels = {"q1": {"d2": 1, "d1": 1}, "q2": {"d3": 0}, "q3": {"d4": 2}}
    pairs = judged_pairs(qrels, ["q3", "q2", "q1"], n=5, seed=0)
    assert sorted(pairs) == [("q1", "d1"), ("q3", "d4")]  # q2 has no relevant document
    assert judged_pairs(qrels, ["q1", "q3"], n=1, seed=0) == pairs[:1]


def test_start_diagnostics_match_the_documented_definitions(start_setup, tmp_path):
    record = _run(start_setup, tmp_path / "pretrained", "--start", "tiny")
    assert record == json.loads((tmp_path / "pretrained" / "results.json").read_text())
    assert record["start"] == "tiny" and record["init"] == "pretrained" and record["init_seed"] is None
    entry = record["sets"]["beir"]
    dataset = load_beir(start_setup / "beir", split="test")
    encoder = TextEncoder.from_pretrained(start_setup / "bert", query_max_length=16, document_max_length=32)
    documents = encoder.encode(dataset.corpus_texts, "document", show_progress=False)
    expected = document_norm_effect(row_norms(documents), dataset.corpus_ids, dataset.relevant_ids(), 1000, 0)
    assert entry["document_norm_effect"]["cohens_d"] == pytest.approx(expected["cohens_d"], rel=1e-4)
    assert entry["document_norm"]["cv"] == pytest.approx(norm_stats(row_norms(documents))["cv"], rel=1e-4)
    fisher = entry["fisher"]
    assert fisher["pairs"] == 6 and fisher["verdict"] in ("qnorm", "dnorm")
    assert fisher["log_kappa_ratio"] == pytest.approx(np.log(fisher["kappa_query"] / fisher["kappa_document"]))
    metrics = read_evaluation(tmp_path / "pretrained").metrics["beir"]
    assert metrics["cohens_d"] == entry["document_norm_effect"]["cohens_d"]
    assert set(metrics) >= {"query_norm_cv", "document_norm_cv", "kappa_query", "kappa_document"}


def test_a_random_start_is_diagnosed_as_one_seeded_model(start_setup, tmp_path):
    random = [_run(start_setup, tmp_path / f"r{i}", "model.init=random", "model.init_seed=3") for i in range(2)]
    pretrained = _run(start_setup, tmp_path / "p")
    assert random[0]["init"] == "random" and random[0]["init_seed"] == 3
    assert random[0]["sets"] == random[1]["sets"]
    assert random[0]["sets"]["beir"]["query_norm"] != pretrained["sets"]["beir"]["query_norm"]


def test_the_bundled_sets_are_read_with_the_settings_of_the_runs_beside_them(start_setup, tmp_path):
    """``bundled.*`` reaches the set a start is diagnosed on: a pinned scikit-learn of another
    version stops the command before it reads or builds anything under ``bundled.root``."""
    root = tmp_path / "bundled"
    root.mkdir()
    with pytest.raises(UserError, match="scikit_learn"):
        main(
            ["--model", str(start_setup / "bert"), "--data", "bundled:outdomain", "--output", str(tmp_path / "out")]
            + [f"bundled.root={root}", "bundled.scikit_learn=0.1"]
        )
    assert not any(root.iterdir())
