"""Heads equal their formulas, the learnable head spans the fixed ones, Prop. 4.1 holds."""

from __future__ import annotations

import pytest
import torch

from clipmag.scoring.head_config import HEAD_NAMES
from clipmag.scoring.heads import HEADS, build_head, scale_by_norm_power

FIXED = {"cosine": (1, 1), "dot": (0, 0), "qnorm": (1, 0), "dnorm": (0, 1)}


def _varied(n: int, dim: int, seed: int, dtype=torch.float64) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, dim, generator=g, dtype=dtype)
    return x * torch.empty(n, 1, dtype=dtype).uniform_(0.1, 10.0, generator=g)


def _formula(name: str, q: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    qn, dn = q.norm(dim=1, keepdim=True), d.norm(dim=1, keepdim=True)
    return {
        "cosine": (q / qn) @ (d / dn).T,
        "dot": q @ d.T,
        "qnorm": (q / qn) @ d.T,
        "dnorm": q @ (d / dn).T,
    }[name]


@pytest.mark.parametrize("name", list(FIXED))
def test_fixed_head_equals_formula(name):
    q, d = _varied(7, 5, 0), _varied(9, 5, 1)
    head = build_head(name)
    torch.testing.assert_close(head.score(q, d), _formula(name, q, d))
    torch.testing.assert_close(head.paired(q, d[:7]), torch.diagonal(_formula(name, q, d[:7])))
    assert head.gammas() == tuple(float(g) for g in FIXED[name])


@pytest.mark.parametrize("name", list(FIXED))
def test_learnable_with_forced_gammas_equals_fixed_head(name):
    q, d = _varied(6, 4, 2), _varied(8, 4, 3)
    gq, gd = FIXED[name]
    learnable = build_head("learnable", gq=float(gq), gd=float(gd)).double()
    assert learnable.gammas() == (float(gq), float(gd))
    torch.testing.assert_close(learnable.score(q, d), build_head(name).score(q, d))


def test_learnable_starts_at_one_half_and_matches_formula():
    head = build_head("learnable")
    assert head.gammas() == (0.5, 0.5)
    q, d = _varied(5, 3, 4, torch.float32), _varied(6, 3, 5, torch.float32)
    expected = (q / q.norm(dim=1, keepdim=True) ** 0.5) @ (d / d.norm(dim=1, keepdim=True) ** 0.5).T
    torch.testing.assert_close(head.score(q, d), expected)


@pytest.mark.parametrize("seed", range(3))
def test_prop_4_1_rankings(seed):
    q, d = _varied(20, 8, seed), _varied(200, 8, seed + 100)
    rank = lambda name: build_head(name).score(q, d).argsort(dim=1, descending=True)  # noqa: E731
    assert torch.equal(rank("dnorm"), rank("cosine"))
    assert torch.equal(rank("qnorm"), rank("dot"))
    assert not torch.equal(rank("qnorm"), rank("cosine"))


@pytest.mark.parametrize("name", HEAD_NAMES)
def test_symmetry(name):
    a, b = _varied(6, 4, 6), _varied(7, 4, 7)
    head = build_head(name).double()
    swapped_equal = torch.allclose(head.score(a, b), head.score(b, a).T)
    assert swapped_equal == (name in ("cosine", "dot", "learnable"))
    assert head.symmetric == swapped_equal
    assert not build_head("learnable", gq=0.2, gd=0.7).symmetric


@pytest.mark.parametrize("name", HEAD_NAMES)
def test_gradcheck(name):
    head = build_head(name).double()
    q = _varied(3, 4, 8).requires_grad_()
    d = _varied(4, 4, 9).requires_grad_()
    params = list(head.parameters())
    if name == "learnable":
        with torch.no_grad():
            head.raw_q.fill_(0.3)
            head.raw_d.fill_(-0.4)

    assert torch.autograd.gradcheck(lambda q_, d_: head.score(q_, d_), (q, d))
    if params:
        raw_q, raw_d = head.raw_q, head.raw_d

        def by_gamma(rq, rd):
            return (
                scale_by_norm_power(q.detach(), torch.sigmoid(rq))
                @ scale_by_norm_power(d.detach(), torch.sigmoid(rd)).T
            )

        assert torch.autograd.gradcheck(
            by_gamma, (raw_q.detach().clone().requires_grad_(), raw_d.detach().clone().requires_grad_())
        )
        head.score(q, d).sum().backward()
        assert raw_q.grad is not None and raw_d.grad is not None and raw_q.grad.abs() > 0


def test_gamma_gradient_is_minus_log_norm_times_score():
    """d s / d gq = -ln|q| * s (docs/method.md section 1), seen through g = sigmoid(raw)."""
    head = build_head("learnable", gq=0.3, gd=0.6).double()
    q, d = _varied(1, 4, 10), _varied(1, 4, 11)
    s = head.score(q, d)[0, 0]
    s.backward()
    gq, gd = head.gammas()
    torch.testing.assert_close(head.raw_q.grad, -torch.log(q.norm()) * s.detach() * gq * (1 - gq))
    torch.testing.assert_close(head.raw_d.grad, -torch.log(d.norm()) * s.detach() * gd * (1 - gd))


@pytest.mark.parametrize("name", HEAD_NAMES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_zero_vectors_and_low_precision_are_finite(name, dtype):
    head = build_head(name)
    magnitude = 300.0 if dtype is torch.bfloat16 else 5.0  # fp16 gradients overflow past 65504
    q = torch.cat([torch.zeros(2, 8), torch.randn(3, 8) * magnitude]).to(dtype).requires_grad_()
    d = torch.cat([torch.zeros(1, 8), torch.randn(4, 8) * magnitude]).to(dtype).requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        s = head.score(q, d)
    assert s.dtype == torch.float32
    assert torch.isfinite(s).all()
    s.sum().backward()
    assert torch.isfinite(q.grad.float()).all() and torch.isfinite(d.grad.float()).all()
    for p in head.parameters():
        assert torch.isfinite(p.grad).all()


@pytest.mark.parametrize("name", HEAD_NAMES)
def test_settings_round_trip(name):
    head = build_head(name) if name != "learnable" else build_head(name, gq=0.25, gd=0.9)
    rebuilt = build_head(head.to_dict())
    assert type(rebuilt) is type(head)
    assert rebuilt.gammas() == pytest.approx(head.gammas(), abs=1e-6)


def test_unknown_head_lists_valid_names():
    with pytest.raises(
        ValueError, match="unknown similarity head 'cos'; valid heads: cosine, dot, qnorm, dnorm, learnable"
    ):
        build_head("cos")
    with pytest.raises(ValueError, match="takes no settings"):
        build_head("dot", gq=0.1)
    with pytest.raises(ValueError, match=r"gamma must lie in \[0, 1\]"):
        build_head("learnable", gq=1.5)


def test_the_names_a_config_accepts_are_the_heads_there_are():
    """``HEAD_NAMES`` is written out for torch-free configs; it must name every head, in order."""
    assert tuple(HEADS) == HEAD_NAMES
