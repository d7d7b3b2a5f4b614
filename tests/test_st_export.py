"""The sentence-transformers export: every head's scores come out of sentence-transformers exactly.

A tiny random BERT with MiniLM's tokenizer keeps each save-and-load under a second; the exactness
is a property of the pipeline, not of the weights.
"""

from __future__ import annotations

import json
import shutil
from unittest.mock import MagicMock

import numpy as np
import pytest
import torch
from text_fixtures import save_tiny_exports

from clipmag.hub import push_export
from clipmag.scoring.head_record import HEAD_FILE, HeadRecord
from text_retrieval.model.card import describe_run

QUERIES = ["how do I sort a list", "vitamin d and respiratory infections", "x"]
DOCUMENTS = [
    "sorted(xs) returns a new sorted list and leaves xs as it is",
    "Vitamin D deficiency is associated with respiratory infection in children.",
    "The mitochondria is the powerhouse of the cell.",
    "short",
]
LONG = "tokens beyond the query length but within the document length " * 3
HEADS = {
    "cosine": ("cosine", {}, "last"),
    "dot": ("dot", {}, "mean"),
    "qnorm": ("qnorm", {}, "mean"),
    "dnorm": ("dnorm", {}, "last"),
    "learnable": ("learnable", {"gq": 0.2, "gd": 0.85}, "cls"),
    "learnable-equal": ("learnable", {"gq": 0.3, "gd": 0.3}, "mean"),
}


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """Each head of ``HEADS`` on one tiny BERT, saved once: key -> (encoder, SentenceTransformer, folder)."""
    from sentence_transformers import SentenceTransformer

    saved = {}
    for key, (encoder, folder) in save_tiny_exports(tmp_path_factory, HEADS).items():
        trust = key.startswith("learnable")  # the learnable head's module is clipmag's
        saved[key] = encoder, SentenceTransformer(str(folder), device="cpu", trust_remote_code=trust), folder
    return saved


def _module_types(folder) -> list[str]:
    types = [m["type"] for m in json.loads((folder / "modules.json").read_text())]
    for router in folder.glob("*_Router/router_config.json"):
        types += json.loads(router.read_text())["types"].values()
    return types


@pytest.mark.parametrize("key", list(HEADS))
def test_similarity_of_query_and_document_encodings_is_the_head_score(exports, key):
    encoder, st, folder = exports[key]
    theirs = st.similarity(st.encode_query(QUERIES), st.encode_document(DOCUMENTS))
    q = torch.from_numpy(encoder.encode(QUERIES, "query", show_progress=False))
    d = torch.from_numpy(encoder.encode(DOCUMENTS, "document", show_progress=False))
    torch.testing.assert_close(theirs, encoder.head.score(q, d), atol=1e-5, rtol=1e-5)
    np.testing.assert_array_equal(st.encode(DOCUMENTS), st.encode_document(DOCUMENTS))  # plain = document route
    types = _module_types(folder)
    clipmag_types = [t for t in types if not t.startswith("sentence_transformers.")]
    gq, gd = encoder.head.gammas()
    learnable = ["text_retrieval.st_modules.NormPower"] * (1 if gq == gd else 2)
    assert clipmag_types == (learnable if key.startswith("learnable") else [])
    assert any(t.endswith("Router") for t in types) == (gq != gd)
    assert HeadRecord.read(folder).head == encoder.head.to_dict()


def test_prefixes_and_per_side_max_lengths_carry_over(exports):
    encoder, st, _ = exports["qnorm"]
    assert st.prompts == {"query": "query: ", "document": "passage: "} and st.default_prompt_name == "document"
    assert (st[0].query_length, st[0].document_length, st.max_seq_length) == (12, 40, 40)
    long_query = torch.from_numpy(encoder.encode([LONG], "query", show_progress=False))
    long_doc = torch.from_numpy(encoder.encode([LONG], "document", show_progress=False))
    torch.testing.assert_close(
        st.similarity(st.encode_query([LONG]), st.encode_document([LONG])),
        encoder.head.score(long_query, long_doc),
        atol=1e-5,
        rtol=1e-5,
    )
    assert not torch.allclose(long_query, long_doc, atol=1e-3)  # the two sides really were cut differently


def test_rankings_inside_sentence_transformers_follow_the_document_side(exports):
    """docs/method.md Prop. 4.1 in sentence-transformers: qnorm ranks as dot, dnorm as cosine."""
    scores = {}
    for key in ("dot", "qnorm", "dnorm", "cosine"):  # mean pooling for the first pair, last for the second
        st = exports[key][1]
        scores[key] = st.similarity(st.encode_query(QUERIES), st.encode_document(DOCUMENTS))
    order = {k: torch.argsort(v, dim=1, descending=True, stable=True) for k, v in scores.items()}
    assert torch.equal(order["qnorm"], order["dot"]) and torch.equal(order["dnorm"], order["cosine"])
    assert not torch.allclose(scores["qnorm"], scores["dot"]) and not torch.allclose(scores["dnorm"], scores["cosine"])


def test_learnable_export_needs_trusted_clipmag_module(exports):
    from sentence_transformers import SentenceTransformer

    folder = exports["learnable"][2]
    with pytest.raises(ValueError, match="trust_remote_code"):
        SentenceTransformer(str(folder), device="cpu")
    card = (folder / "README.md").read_text()
    assert "trust_remote_code=True" in card and "gq = 0.2, gd = 0.85" in card and "| pooling | cls |" in card


def test_run_card_states_head_training_data_and_results(exports, tmp_path):
    from clipmag.results.record import build_results, write_results

    shutil.copytree(exports["dnorm"][2], tmp_path / "export")
    record = HeadRecord.read(tmp_path / "export")
    metrics = {"scifact": {"NDCG@10": 0.61234, "diagnostics": {}}}
    run = {"front_end": "text", "steps": 30, "seed": 0, "objective": "infonce"}
    write_results(build_results(run, record, {"path": "export"}, metrics, {}, {}), tmp_path)
    (tmp_path / "config.yaml").write_text("data:\n  train: data/pairs\n")
    assert "Recorded in the run's `results.json`" in (tmp_path / "export" / "README.md").read_text()
    card = describe_run(tmp_path).read_text()
    assert "`dnorm` head" in card and "gq = 0, gd = 1" in card and "| pooling | last |" in card
    assert "| scifact | NDCG@10 0.6123 |" in card and "| training data | data/pairs |" in card
    assert "trust_remote_code" not in card and "Plain `encode()` follows the document route" in card


def test_text_export_goes_to_the_hub_with_head_record_and_card(exports):
    folder = exports["qnorm"][2]
    api = MagicMock()
    push_export(folder, "user/tiny-qnorm", api=api)
    api.create_repo.assert_called_once_with("user/tiny-qnorm", private=False, exist_ok=True)
    assert api.upload_folder.call_args.kwargs["folder_path"] == str(folder)
    assert {HEAD_FILE, "README.md", "modules.json"} <= {p.name for p in folder.iterdir()}
