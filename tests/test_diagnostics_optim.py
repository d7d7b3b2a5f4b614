"""Diagnostics formulas and optimizer parameter groups."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from clipmag.scoring.diagnostics import cohens_d, effect_size_band, effective_scale, magnitude_summary, norm_stats
from clipmag.scoring.heads import build_head
from clipmag.scoring.losses import InfoNCE
from clipmag.train.optim_config import OptimConfig
from clipmag.train.optimizer import build_optimizer, lr_factor


def test_cohens_d_uses_pooled_standard_deviation():
    a, b = np.array([3.0, 4.0, 5.0, 6.0]), np.array([1.0, 2.0, 2.5])
    pooled = math.sqrt((3 * a.var(ddof=1) + 2 * b.var(ddof=1)) / 5)
    assert cohens_d(a, b) == pytest.approx((a.mean() - b.mean()) / pooled)
    assert cohens_d(b, a) == pytest.approx(-cohens_d(a, b))
    assert [effect_size_band(x) for x in (0.1, -0.3, 0.6, 1.2)] == ["negligible", "small", "medium", "large"]
    with pytest.raises(ValueError, match="at least 2 values per group"):
        cohens_d([1.0], [1.0, 2.0])


def test_norm_stats_and_effective_temperature_under_dnorm():
    q = torch.tensor([[3.0, 4.0], [0.0, 2.0]])
    d = torch.tensor([[1.0, 0.0], [0.0, 10.0]])
    stats = norm_stats(torch.tensor([5.0, 2.0]))
    assert stats["mean"] == 3.5 and stats["cv"] == pytest.approx(np.std([5, 2], ddof=1) / 3.5)
    summary = magnitude_summary(q, d, build_head("dnorm"), scale=20.0)
    assert summary["effective_scale"] == pytest.approx(20.0 * 3.5)  # Prop. 4.2: tau_eff = tau / |q|
    assert summary["effective_temperature"] == pytest.approx(1 / 70.0)
    assert effective_scale(20.0, [5.0, 2.0], [1.0, 10.0], 1.0, 1.0) == 20.0
    assert (summary["gamma_q"], summary["gamma_d"]) == (0.0, 1.0)


def test_param_groups_give_gammas_and_scale_their_own_treatment():
    head = build_head("learnable")
    model = torch.nn.ModuleDict({"enc": torch.nn.Linear(4, 3), "head": head, "loss": InfoNCE(learnable_scale=True)})
    opt = build_optimizer(model, OptimConfig(lr=1e-5, gamma_lr=1e-2, weight_decay=0.01))
    groups = {g["name"]: g for g in opt.param_groups}
    assert groups["gammas"]["lr"] == 1e-2 and groups["gammas"]["weight_decay"] == 0.0
    assert {id(p) for p in groups["gammas"]["params"]} == {id(head.raw_q), id(head.raw_d)}
    assert groups["scale"]["weight_decay"] == 0.0 and groups["scale"]["params"][0] is model["loss"].log_scale
    assert groups["decay"]["params"] == [model["enc"].weight] and groups["decay"]["weight_decay"] == 0.01
    assert groups["no_decay"]["params"] == [model["enc"].bias]


def test_schedules():
    assert lr_factor(0, 100, "cosine") == 1.0
    assert lr_factor(50, 100, "cosine") == pytest.approx(0.5)
    assert lr_factor(100, 100, "cosine") == pytest.approx(0.0)
    assert lr_factor(4, 100, "linear", warmup_steps=10) == pytest.approx(0.5)
    assert lr_factor(30, 100, "constant") == 1.0
