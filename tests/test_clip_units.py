"""Unit tests of the image-text front end: embedded set, batching, model state, metrics, config."""

from __future__ import annotations

import tarfile

import numpy as np
import open_clip
import pytest
import torch

from clipmag.clip import embedded
from clipmag.clip.data import ShardError, validate_shards
from clipmag.clip.evaluate import caption_relevance, hardest_negative_norm_d, recall_at_k
from clipmag.clip.model import ClipMagModel, ClipModelConfig, build_open_clip, export_open_clip, load_clipmag
from clipmag.clip.config import parse_args
from clipmag.config import ConfigError
from clipmag.heads import build_head
from clipmag.losses import InfoNCE


def test_embedded_is_deterministic_and_captions_name_positions():
    a = embedded.build_embedded(n_train=200, n_test=50, n_per_class=3, seed=1)
    b = embedded.build_embedded(n_train=200, n_test=50, n_per_class=3, seed=1)
    assert np.array_equal(a.train.images, b.train.images) and a.test.captions == b.test.captions
    assert len(set(a.test.captions)) == 50  # every test caption unique
    assert a.train.images.shape == (200, 16, 16) and a.train.images.dtype == np.uint8
    d = a.test.digits[0].tolist()
    assert a.test.captions[0] == f"top left {d[0]}, top right {d[1]}, bottom left {d[2]}, bottom right {d[3]}"
    assert (a.classification.labels[:, None] == a.classification.digits).all()
    c = embedded.build_embedded(n_train=500, n_test=50, n_per_class=3, seed=1)
    assert c.test.captions == a.test.captions and np.array_equal(c.test.images, a.test.images)
    assert a.test.pil(0).mode == "RGB"


def test_recall_and_norm_effect_size_on_a_handmade_matrix():
    scores = torch.tensor([[0.9, 0.1, 0.0], [0.8, 0.7, 0.0], [0.0, 0.5, 0.4]])
    relevant = torch.eye(3, dtype=torch.bool)
    r = recall_at_k(scores, relevant, ks=(1, 2))
    assert r[1] == pytest.approx(1 / 3) and r[2] == pytest.approx(1.0)
    rel = caption_relevance(["a", "b", "a"], ["a", "b", "a"])
    assert rel.tolist() == [[True, False, True], [False, True, False], [True, False, True]]
    norms = torch.tensor([3.0, 1.0, 2.0, 1.5])
    cos = torch.tensor([[1.0, 0.9, 0, 0], [0.9, 1.0, 0, 0], [0, 0, 1.0, 0.9], [0, 0, 0.8, 1.0]])
    assert hardest_negative_norm_d(cos, torch.eye(4, dtype=torch.bool), norms) == pytest.approx(0.0)


@pytest.fixture(scope="module")
def micro():
    torch.manual_seed(0)
    clip, _, preprocess, tokenizer = build_open_clip(ClipModelConfig(name="clipmag-micro"))
    return clip, preprocess, tokenizer


@pytest.mark.parametrize("learnable", [True, False])
def test_state_dict_is_open_clips_and_export_round_trips(micro, tmp_path, learnable):
    clip, preprocess, tokenizer = micro
    loss = InfoNCE(build_head("learnable" if learnable else "qnorm"), scale=10.0, direction="q2d", learnable_scale=learnable)
    model = ClipMagModel(clip, loss, "text", "clipmag-micro")
    if learnable:
        assert loss.log_scale is clip.logit_scale
    sd = model.state_dict()
    tower_keys = set(clip.state_dict())
    assert set(k for k in sd if not k.startswith("clipmag_head.")) == tower_keys
    assert float(sd["logit_scale"]) == pytest.approx(np.log(10.0))
    bare = open_clip.create_model("clipmag-micro")
    bare.load_state_dict({k: v for k, v in sd.items() if k in tower_keys})  # strict: open_clip's format
    model.load_state_dict(sd)  # and back
    export_open_clip(model, tmp_path / "export")
    loaded, _, _ = load_clipmag(tmp_path / "export")
    assert loaded.query_side == "text" and loaded.head.name == model.head.name
    images = torch.randn(3, 3, 16, 16)
    texts = tokenizer(["top left 1", "top right 2", "bottom left 3"])
    with torch.no_grad():
        a = model.similarity(model.encode_image(images), model.encode_text(texts))
        b = loaded.similarity(loaded.encode_image(images), loaded.encode_text(texts))
    assert torch.allclose(a, b, atol=1e-5)
    assert a.shape == (3, 3)
    warm, _, _, _ = build_open_clip(ClipModelConfig(name="clipmag-micro", pretrained=str(tmp_path / "export")))
    assert torch.equal(warm.state_dict()["text_projection"], clip.state_dict()["text_projection"])


def test_forward_reports_loss_and_magnitude_stats(micro):
    clip, preprocess, tokenizer = micro
    model = ClipMagModel(clip, InfoNCE(build_head("dnorm"), direction="both"), "image", "clipmag-micro")
    out = model((torch.randn(4, 3, 16, 16).half(), tokenizer(["a", "b", "c", "d"])))
    assert out["loss"].requires_grad and out["loss"].ndim == 0
    for key in ("q_norm_mean", "d_norm_mean", "gamma_q", "gamma_d", "effective_temperature", "image_norm_mean", "text_norm_mean"):
        assert key in out


def test_objective_sets_direction_and_query_side():
    cfg = parse_args(["--loss", "t2i", "--norm", "dnorm"])
    assert (cfg.loss.direction, cfg.model.query_side) == ("q2d", "text")
    cfg = parse_args(["--loss", "sym", "--query-side", "text"])
    assert (cfg.loss.direction, cfg.model.query_side) == ("both", "text")
    cfg = parse_args(["--loss", "i2t"])
    assert cfg.model.query_side == "image" and cfg.data.source == "embedded"
    assert parse_args(["--loss", "sym"]).model.query_side == "image"
    assert parse_args(["--train-shards", "x/{0..1}.tar"]).data.source == "shards"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--loss", "x2y"], "objective"),
        (["--norm", "l2"], "head.name"),
        (["data.batch_sz=4"], "unknown key 'data.batch_sz'"),
        (["--model", "ViT-Q-99"], "unknown open_clip architecture"),
        (["--model", "missing/model.json"], "JSON model config not found"),
        (["data.source=shards"], "needs data.train_shards"),
        (["--batch-size", "1"], "batch_size must be >= 2"),
        (["--bogus", "1"], "unknown flag --bogus"),
        (["--loss", "i2t", "--query-side", "text"], "model.query_side=text contradicts objective=i2t"),
        (["--loss", "sym", "loss.direction=q2d"], "loss.direction=q2d contradicts objective=sym"),
    ],
)
def test_bad_configs_fail_clearly(argv, message):
    with pytest.raises(ConfigError, match=message):
        parse_args(argv)


def test_bad_shards_fail_clearly(tmp_path):
    with pytest.raises(ShardError, match="shard not found"):
        validate_shards(str(tmp_path / "missing-{000..001}.tar"))
    (tmp_path / "junk.tar").write_bytes(b"this is not a tar file" * 40)
    with pytest.raises(ShardError, match="not a readable tar"):
        validate_shards(str(tmp_path / "junk.tar"))
    with tarfile.open(tmp_path / "nocap.tar", "w") as tar:
        (tmp_path / "a.png").write_bytes(b"\x89PNG")
        tar.add(tmp_path / "a.png", arcname="0001.png")
    with pytest.raises(ShardError, match="no sample with an image"):
        validate_shards(str(tmp_path / "nocap.tar"))
