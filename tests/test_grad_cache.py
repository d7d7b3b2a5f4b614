"""Gradient caching equals one backward pass over the whole batch, and replays dropout exactly."""

from __future__ import annotations

import contextlib

import pytest
import torch
from torch import nn
from toy_task import TwoTower, global_batch

from clipmag.scoring.heads import build_head
from clipmag.scoring.losses import InfoNCE
from clipmag.train.grad_cache import cached_backward


def _grads(model: nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def _model(head: str, direction: str) -> TwoTower:
    torch.manual_seed(0)
    h = build_head(head)
    return TwoTower(h, InfoNCE(scale=10.0, direction=direction, learnable_scale=True))


@pytest.mark.parametrize("head", ["cosine", "dot", "qnorm", "dnorm", "learnable"])
@pytest.mark.parametrize("direction", ["q2d", "d2q", "both"])
@pytest.mark.parametrize("negatives", [0, 2])
def test_chunked_loss_and_gradients_equal_the_full_batch(head, direction, negatives):
    batch = global_batch(seed=3, index=0, size=12, negatives=negatives)
    full, chunked = _model(head, direction), _model(head, direction)
    full(batch)["loss"].backward()
    out = cached_backward(chunked, batch, 5, lambda loss: loss.backward(), torch.device("cpu"), contextlib.nullcontext)
    assert float(out["loss"].detach()) == pytest.approx(float(full(batch)["loss"].detach()), abs=1e-6)
    expected, got = _grads(full), _grads(chunked)
    assert expected.keys() == got.keys() and "loss.log_scale" in got
    for name in expected:
        assert torch.allclose(got[name], expected[name], atol=1e-5), name


def test_dropout_is_replayed_between_the_two_passes():
    head = build_head("dot")
    model = TwoTower(head, InfoNCE(direction="q2d"), dropout=0.5).train()
    batch = global_batch(seed=1, index=0, size=8)
    seen, embed_parts = [], model.embed_parts

    def recording(piece):
        parts = embed_parts(piece)
        q = next(parts)
        seen.append(q.detach().clone())
        yield q
        yield from parts

    model.embed_parts = recording
    cached_backward(model, batch, 4, lambda loss: loss.backward(), torch.device("cpu"), contextlib.nullcontext)
    first_pass, second_pass = seen[:2], seen[2:]
    assert all(torch.equal(a, b) for a, b in zip(first_pass, second_pass))
    model.eval()
    assert not torch.equal(first_pass[0], next(embed_parts(model.chunks(batch, 4)[0])))  # dropout was on


def test_each_part_is_back_propagated_before_the_next_is_embedded():
    """The replay holds one side's graph at a time: a chunk's queries are back-propagated before
    its documents are embedded (as sentence-transformers' cached loss does, column by column)."""
    head = build_head("cosine")
    model = TwoTower(head, InfoNCE(direction="both"))
    batch = global_batch(seed=2, index=0, size=8)
    events, embed_parts = [], model.embed_parts

    def recording(piece):
        parts = embed_parts(piece)
        q = next(parts)
        if q.requires_grad:  # the replay, not the pass without a graph
            q.register_hook(lambda grad: events.append("query backward"))
        yield q
        events.append("documents forward")
        yield from parts

    model.embed_parts = recording
    cached_backward(model, batch, 4, lambda loss: loss.backward(), torch.device("cpu"), contextlib.nullcontext)
    replay = events[2:]  # after the two chunks' passes without a graph
    assert replay == ["query backward", "documents forward"] * 2
