"""Gradient caching equals one backward pass over the whole batch, and replays dropout exactly."""

from __future__ import annotations

import contextlib

import pytest
import torch
from torch import nn
from toy_task import TwoTower, global_batch

from clipmag.grad_cache import cached_backward
from clipmag.heads import build_head
from clipmag.losses import InfoNCE


def _grads(model: nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def _model(head: str, direction: str) -> TwoTower:
    torch.manual_seed(0)
    h = build_head(head)
    return TwoTower(h, InfoNCE(h, scale=10.0, direction=direction, learnable_scale=True))


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
    model = TwoTower(head, InfoNCE(head, direction="q2d"), dropout=0.5).train()
    batch = global_batch(seed=1, index=0, size=8)
    seen, embed = [], model.embed

    def recording(piece):
        q, d = embed(piece)
        seen.append(q.detach().clone())
        return q, d

    model.embed = recording
    cached_backward(model, batch, 4, lambda loss: loss.backward(), torch.device("cpu"), contextlib.nullcontext)
    first_pass, second_pass = seen[:2], seen[2:]
    assert all(torch.equal(a, b) for a, b in zip(first_pass, second_pass))
    model.eval()
    assert not torch.equal(first_pass[0], embed(model.chunks(batch, 4)[0])[0])  # dropout was on
