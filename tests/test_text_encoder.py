"""TextEncoder: pooling, batching invariance, gradients, prefixes, save/load and sentence-transformers parity."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from text_fixtures import TEST_MAX_LENGTH, minilm_encoder, minilm_path

from text_retrieval.model.encoder import HEAD_FILE, TextEncoder
from text_retrieval.model.pooling import pool

TEXTS = [
    "Aspirin reduces the risk of heart attack.",
    "x",
    "The mitochondria is the powerhouse of the cell, producing ATP through oxidative phosphorylation in eukaryotes.",
    "Short one.",
    "Vitamin D deficiency is associated with increased risk of respiratory infection in children and adults alike.",
]


def test_pool_ignores_padding_on_either_side():
    torch.manual_seed(0)
    states = torch.randn(1, 4, 8)
    unpadded_mask = torch.ones(1, 4, dtype=torch.long)
    junk = torch.full((1, 3, 8), 1e3)
    right = torch.cat([states, junk], dim=1)
    left = torch.cat([junk, states], dim=1)
    right_mask = torch.tensor([[1, 1, 1, 1, 0, 0, 0]])
    left_mask = torch.tensor([[0, 0, 0, 1, 1, 1, 1]])
    for mode in ("mean", "last"):
        expected = pool(states, unpadded_mask, mode)
        torch.testing.assert_close(pool(right, right_mask, mode), expected)
        torch.testing.assert_close(pool(left, left_mask, mode), expected)
    torch.testing.assert_close(pool(states, unpadded_mask, "last"), states[:, -1])
    torch.testing.assert_close(pool(right, right_mask, "cls"), states[:, 0])
    with pytest.raises(ValueError, match="unknown pooling"):
        pool(states, unpadded_mask, "max")


def test_encode_is_batch_and_order_invariant():
    enc = minilm_encoder(precision="fp32")  # bf16 kernels (AMX) may round a row differently by batch shape
    together = enc.encode(TEXTS, "document", batch_size=2, show_progress=False)
    alone = np.stack([enc.encode([t], "document", show_progress=False)[0] for t in TEXTS])
    assert together.dtype == np.float32 and together.shape == (len(TEXTS), enc.dim)
    np.testing.assert_allclose(together, alone, atol=2e-5)
    # norms are raw (not unit): the cosine head is not baked in
    assert np.abs(np.linalg.norm(together, axis=1) - 1).max() > 0.1


def test_embed_has_gradient_and_matches_encode():
    enc = minilm_encoder(precision="fp32")  # embed() here runs without autocast
    batch = enc.tokenize(TEXTS[:3], "query")
    vectors = enc.embed(batch)
    assert vectors.requires_grad
    vectors.norm(dim=-1).sum().backward()
    assert any(p.grad is not None for p in enc.model.parameters())
    enc.model.zero_grad(set_to_none=True)
    enc.model.eval()
    np.testing.assert_allclose(vectors.detach().numpy(), enc.encode(TEXTS[:3], "query", show_progress=False), atol=2e-5)


def test_prefixes_and_max_lengths_are_per_side():
    enc = minilm_encoder(
        query_prefix="query: ", document_prefix="passage: ", query_max_length=8, document_max_length=TEST_MAX_LENGTH
    )
    q = enc.tokenize([TEXTS[2]], "query")
    d = enc.tokenize([TEXTS[2]], "document")
    assert q["input_ids"].shape[1] == 8 and d["input_ids"].shape[1] > 8
    assert enc.tokenizer.decode(q["input_ids"][0]).startswith("[CLS] query :")
    assert enc.tokenizer.decode(d["input_ids"][0]).startswith("[CLS] passage :")
    assert not np.allclose(
        enc.encode(["same text"], "query", show_progress=False),
        enc.encode(["same text"], "document", show_progress=False),
    )
    with pytest.raises(ValueError, match="side must be"):
        enc.tokenize(["a"], "passage")


def test_from_pretrained_defaults_and_unknown_setting():
    enc = TextEncoder.from_pretrained(minilm_path())
    assert enc.pooling == "mean" and enc.head.name == "cosine"
    assert enc.document_max_length == 256  # from the model's sentence_bert_config.json
    with pytest.raises(TypeError, match="unknown setting"):
        TextEncoder.from_pretrained(minilm_path(), maxlen=5)


def test_save_and_reload_restores_head_and_settings(tmp_path):
    from clipmag.scoring.heads import build_head

    enc = minilm_encoder(norm="qnorm", pooling="cls", query_prefix="q: ", document_prefix="d: ", query_max_length=32)
    enc.head = build_head("learnable", gq=0.3, gd=0.8)
    enc.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / HEAD_FILE).read_text())
    assert saved["pooling"] == "cls" and saved["head"]["name"] == "learnable" and saved["format_version"] == 2
    back = TextEncoder.from_pretrained(tmp_path)
    assert (back.pooling, back.query_prefix, back.document_prefix) == ("cls", "q: ", "d: ")
    assert (back.query_max_length, back.document_max_length) == (32, TEST_MAX_LENGTH)
    np.testing.assert_allclose(back.head.gammas(), (0.3, 0.8), atol=1e-6)
    np.testing.assert_allclose(
        back.encode(TEXTS, "query", show_progress=False), enc.encode(TEXTS, "query", show_progress=False), atol=1e-5
    )
    overridden = TextEncoder.from_pretrained(tmp_path, norm="dnorm", pooling="mean", query_max_length=16)
    assert (overridden.head.name, overridden.pooling, overridden.query_max_length) == ("dnorm", "mean", 16)


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_sentence_transformers_loads_export_with_same_raw_embeddings(tmp_path, pooling):
    from sentence_transformers import SentenceTransformer

    enc = minilm_encoder(norm="dot", pooling=pooling, precision="fp32")  # sentence-transformers encodes in fp32
    enc.save_pretrained(tmp_path)
    modules = json.loads((tmp_path / "modules.json").read_text())
    assert [m["type"].rsplit(".", 1)[-1] for m in modules] == ["Transformer", "Pooling"]
    st = SentenceTransformer(str(tmp_path), device="cpu")
    theirs = st.encode(TEXTS, batch_size=2, convert_to_numpy=True)
    ours = enc.encode(TEXTS, "document", show_progress=False)
    np.testing.assert_allclose(theirs, ours, atol=2e-5)
