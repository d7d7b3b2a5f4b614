"""SigLIP's sigmoid loss under every head: open_clip's SigLipLoss under cosine, the written-out loss
under the others, gradient caching and bf16 as for InfoNCE, its settings, and its place in the head
record of the model, every checkpoint and every export (open_clip loads the export, bias included).
The two-rank equivalence is tests/test_losses.py's (tests/dist_loss_worker.py)."""

from __future__ import annotations

import contextlib
import json
import math

import open_clip
import pytest
import torch
import torch.nn.functional as F
from open_clip.loss import SigLipLoss
from toy_task import TwoTower, global_batch

from clipmag.errors import ConfigError
from clipmag.runtime import precision
from clipmag.scoring.head_record import HEAD_FILE, HeadRecord
from clipmag.scoring.heads import build_head
from clipmag.scoring.losses import SigLIP
from clipmag.train.grad_cache import cached_backward
from image_text.cli import parse_args
from image_text.model.architecture import build_open_clip
from image_text.model.clip_model import ClipMagModel
from image_text.model.config import ClipModelConfig
from image_text.model.export import export_open_clip
from image_text.model.loading import load_clipmag


def _features(n: int = 6, dim: int = 5, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    norms = torch.rand(n, 1, generator=g, dtype=torch.float64) * 3 + 0.5  # raw norms: cosine must drop them
    return (
        torch.randn(n, dim, generator=g, dtype=torch.float64) * norms,
        torch.randn(n, dim, generator=g, dtype=torch.float64),
    )


def test_under_cosine_equals_open_clips_siglip_loss_with_gradients():
    images, texts = _features()
    ours_i, ours_t = images.clone().requires_grad_(), texts.clone().requires_grad_()
    loss = SigLIP(scale=7.0, bias=-4.0, learnable=True).double()
    ours = loss(ours_i, ours_t, build_head("cosine"))["loss"]
    ours.backward()
    theirs_i, theirs_t = images.clone().requires_grad_(), texts.clone().requires_grad_()
    log_scale = torch.tensor(math.log(7.0), dtype=torch.float64, requires_grad=True)
    bias = torch.tensor(-4.0, dtype=torch.float64, requires_grad=True)
    theirs = SigLipLoss()(F.normalize(theirs_i, dim=-1), F.normalize(theirs_t, dim=-1), log_scale.exp(), bias)
    theirs.backward()
    assert abs(float(ours.detach()) - float(theirs.detach())) < 1e-6
    for mine, reference in ((ours_i, theirs_i), (ours_t, theirs_t), (loss.log_scale, log_scale), (loss.bias, bias)):
        assert float((mine.grad - reference.grad).abs().max()) < 1e-6


@pytest.mark.parametrize("head_name", ["dot", "qnorm", "dnorm", "learnable"])
def test_every_head_scores_the_pairs_hard_negatives_included(head_name):
    q, d = _features(n=4)
    negatives = torch.randn(4, 2, 5, dtype=torch.float64)
    documents = torch.cat([d.unsqueeze(1), negatives], dim=1)
    head = build_head(head_name).double()
    out = SigLIP(scale=10.0, bias=-10.0).double()(q, documents, head)
    candidates = torch.cat([d, negatives.reshape(-1, 5)])
    logits = 10.0 * head.score(q, candidates) - 10.0
    labels = -torch.ones_like(logits)
    labels[torch.arange(4), torch.arange(4)] = 1.0
    torch.testing.assert_close(out["loss"], -F.logsigmoid(labels * logits).sum() / 4)
    assert set(out) >= {"loss", "scale", "bias", "accuracy", "logits_pos_mean", "logits_neg_mean"}
    asymmetric = head_name in ("qnorm", "dnorm")
    swapped = SigLIP().double()(d, q.unsqueeze(1), head)["loss"]
    assert (abs(float(swapped) - float(SigLIP().double()(q, d, head)["loss"])) > 1e-6) == asymmetric


@pytest.mark.parametrize("head", ["cosine", "qnorm", "learnable"])
@pytest.mark.parametrize("negatives", [0, 2])
def test_gradient_caching_equals_the_full_batch(head, negatives):
    def model() -> TwoTower:
        torch.manual_seed(0)
        return TwoTower(build_head(head), SigLIP(learnable=True))

    batch = global_batch(seed=3, index=0, size=12, negatives=negatives)
    full, chunked = model(), model()
    full(batch)["loss"].backward()
    out = cached_backward(chunked, batch, 5, lambda loss: loss.backward(), torch.device("cpu"), contextlib.nullcontext)
    assert float(out["loss"].detach()) == pytest.approx(float(full(batch)["loss"].detach()), abs=1e-5)
    got = {n: p.grad for n, p in chunked.named_parameters() if p.grad is not None}
    assert {"loss.log_scale", "loss.bias"} <= set(got)
    for name, p in full.named_parameters():
        assert torch.allclose(got[name], p.grad, atol=1e-5), name


def test_computes_in_fp32_under_bf16_autocast():
    tower = torch.nn.Linear(8, 4)
    with precision.autocast(torch.device("cpu"), torch.bfloat16):
        q, d = tower(torch.randn(5, 8)), tower(torch.randn(5, 8))
        assert q.dtype == torch.bfloat16
        out = SigLIP()(q, d, build_head("dnorm"))
    assert out["loss"].dtype == torch.float32 and torch.isfinite(out["loss"])


def test_siglip_flag_starts_as_open_clip_and_refuses_what_it_has_no_use_for():
    cfg = parse_args(["--siglip"])
    assert (cfg.loss.kind, cfg.loss.scale, cfg.loss.bias, cfg.loss.learnable_scale) == ("siglip", 10.0, -10.0, True)
    assert parse_args(["--siglip", "loss.scale=5", "loss.bias=-2"]).loss.scale == 5.0
    assert parse_args([]).loss.scale == pytest.approx(1 / 0.07) and parse_args([]).loss.bias is None
    with pytest.raises(ConfigError, match="loss.bias is SigLIP's"):
        parse_args(["loss.bias=-3"])
    with pytest.raises(ConfigError, match="loss.label_smoothing smooths InfoNCE's"):
        parse_args(["--siglip", "loss.label_smoothing=0.1"])
    with pytest.raises(ConfigError, match="--siglip takes no value"):
        parse_args(["--siglip=false"])


@pytest.mark.parametrize("learnable", [True, False])
def test_the_bias_is_open_clips_logit_bias_in_the_model_record_and_export(tmp_path, learnable):
    torch.manual_seed(0)
    clip, _, _, tokenizer = build_open_clip(ClipModelConfig(name="clipmag-micro"))
    assert clip.logit_bias is None  # an architecture without one gets one
    loss = SigLIP(scale=10.0, bias=-7.5, learnable=learnable)
    model = ClipMagModel(clip, build_head("qnorm"), loss, "image", "clipmag-micro")
    assert (loss.bias is clip.logit_bias) == learnable and clip.logit_bias.requires_grad == learnable
    assert float(model.state_dict()["logit_bias"]) == -7.5
    record = model.head_record()
    assert (record.loss_kind, record.loss_direction, record.bias, record.scale) == ("siglip", None, -7.5, 10.0)
    export = export_open_clip(model, tmp_path / "export")
    assert json.loads((export / HEAD_FILE).read_text())["loss_kind"] == "siglip"
    assert "siglip" in (export / "README.md").read_text()
    theirs = open_clip.create_model(f"local-dir:{export}")  # open_clip alone builds and loads the bias
    assert float(theirs.logit_bias) == -7.5
    loaded, _, _ = load_clipmag(export)
    assert loaded.head_record() == record and isinstance(loaded.loss, SigLIP)
    images, texts = torch.randn(3, 3, 16, 16), tokenizer(["top left 1", "top right 2", "bottom left 3"])
    with torch.no_grad():
        a = model.similarity(model.encode_image(images), model.encode_text(texts))
        b = loaded.similarity(loaded.encode_image(images), loaded.encode_text(texts))
    torch.testing.assert_close(a, b)


def test_records_before_the_loss_kind_load_as_infonce():
    old = {"head": {"name": "dnorm"}, "query_side": "text", "loss_direction": "q2d", "scale": 20.0}
    assert HeadRecord.from_dict(old).loss_kind == "infonce"
    assert HeadRecord.from_dict({"head": {"name": "qnorm"}, "pooling": "mean"}).loss_kind is None
    siglip = HeadRecord(head={"name": "dot"}, query_side="image", loss_kind="siglip", scale=10.0, bias=-10.0)
    assert HeadRecord.from_dict(siglip.to_dict()) == siglip
