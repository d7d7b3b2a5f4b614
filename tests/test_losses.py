"""InfoNCE: equals the written-out cross-entropy; layout of hard negatives; scale; equivalence
of two gloo processes with one process on the concatenated batch (InfoNCE and SigLIP)."""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F
from conftest import REPO, run_python

from clipmag.scoring.heads import build_head
from clipmag.scoring.losses import InfoNCE


def _data(n=5, k=0, dim=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, dim, generator=g), torch.randn(n, 1 + k, dim, generator=g)


@pytest.mark.parametrize("head_name", ["cosine", "dnorm", "qnorm", "dot"])
def test_q2d_equals_cross_entropy_over_candidates(head_name):
    q, docs = _data(k=2)
    head = build_head(head_name)
    out = InfoNCE(scale=20.0)(q, docs, head)
    candidates = torch.cat([docs[:, 0], docs[:, 1:].reshape(-1, 4)])
    logits = 20.0 * head.score(q, candidates)
    torch.testing.assert_close(out["loss"], F.cross_entropy(logits, torch.arange(5)))
    assert set(out) >= {"loss", "loss_q2d", "scale", "accuracy", "logits_pos_mean", "logits_neg_mean", "logits_std"}


def test_d2q_ranks_queries_for_each_document_and_both_averages():
    q, docs = _data(k=1)
    head = build_head("qnorm")
    logits = 20.0 * head.score(q, docs[:, 0])
    d2q = InfoNCE(direction="d2q")(q, docs, head)
    torch.testing.assert_close(d2q["loss"], F.cross_entropy(logits.T, torch.arange(5)))
    both = InfoNCE(direction="both")(q, docs, head)
    torch.testing.assert_close(both["loss"], (both["loss_q2d"] + both["loss_d2q"]) / 2)


def test_two_dim_documents_mean_no_hard_negatives():
    q, docs = _data()
    loss, head = InfoNCE(), build_head("cosine")
    torch.testing.assert_close(loss(q, docs[:, 0], head)["loss"], loss(q, docs, head)["loss"])


def test_learnable_scale_is_clamped_and_trains():
    q, docs = _data()
    loss = InfoNCE(scale=1 / 0.07, learnable_scale=True, max_scale=100.0)
    assert isinstance(loss.log_scale, torch.nn.Parameter)
    loss(q, docs, build_head("cosine"))["loss"].backward()
    assert loss.log_scale.grad is not None
    with torch.no_grad():
        loss.log_scale.fill_(math.log(1000.0))  # as if an optimizer step overshot the cap
    loss.clamp_scale_()
    assert float(loss.current_scale().detach()) == pytest.approx(100.0)


def test_label_smoothing_changes_the_loss():
    q, docs = _data()
    plain = InfoNCE()(q, docs, build_head("cosine"))["loss"]
    smooth = InfoNCE(label_smoothing=0.1)(q, docs, build_head("cosine"))["loss"]
    assert not torch.isclose(plain, smooth)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="unknown loss direction 'i2t'; valid: q2d, d2q, both"):
        InfoNCE(direction="i2t")
    with pytest.raises(ValueError, match=r"InfoNCE expects query \[N, D\]"):
        InfoNCE()(torch.randn(3, 4), torch.randn(2, 4), build_head("cosine"))


def test_two_gloo_processes_equal_one_process(tmp_path):
    out = tmp_path / "diffs.json"
    run_python(REPO / "tests" / "dist_loss_worker.py", [str(out)], nproc=2)
    results = json.loads(out.read_text())
    assert len(results) == 16  # InfoNCE in three directions and SigLIP, two heads, with and without negatives
    for case, diffs in results.items():
        assert any(k.endswith("raw_q_grad") for k in diffs) == case.startswith("learnable")
        assert any(k.endswith("log_scale_grad") for k in diffs)
        assert any(k.endswith("loss.bias_grad") for k in diffs) == ("-siglip-" in case)
        for name, diff in diffs.items():
            assert diff < 1e-5, f"{case}: {name} differs by {diff}"


def test_learnable_scale_is_clamped_after_the_step_not_in_the_forward():
    head = build_head("cosine")
    loss = InfoNCE(scale=500.0, learnable_scale=True, max_scale=100.0)
    assert float(loss.current_scale().detach()) == pytest.approx(100.0)  # the start is clamped
    q, d = torch.randn(6, 4), torch.randn(6, 4)
    loss(q, d, head)["loss"].backward()
    assert loss.log_scale.grad is not None and float(loss.log_scale.grad) != 0.0  # not pinned at the cap
    with torch.no_grad():
        loss.log_scale.add_(1.0)
    loss.clamp_scale_()
    assert float(loss.current_scale().detach()) == pytest.approx(100.0)
