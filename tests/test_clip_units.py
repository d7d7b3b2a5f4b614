"""Unit tests of the image-text front end: bundled set, batching, model state, metrics, config."""

from __future__ import annotations

import math
import tarfile

import numpy as np
import open_clip
import pytest
import torch

from clipmag.errors import ConfigError
from clipmag.scoring.heads import build_head
from clipmag.scoring.losses import InfoNCE
from image_text.cli import parse_args
from image_text.data import bundled
from image_text.data.reading import ShardError, validate_shards
from image_text.evaluation.retrieval import hardest_negative_norm_d, image_text_recall, retrieval_metrics
from image_text.model.architecture import build_open_clip
from image_text.model.clip_model import ClipMagModel
from image_text.model.config import ClipModelConfig
from image_text.model.export import export_open_clip
from image_text.model.loading import load_clipmag


@pytest.fixture(scope="module")
def micro():
    torch.manual_seed(0)
    clip, _, preprocess, tokenizer = build_open_clip(ClipModelConfig(name="clipmag-micro"))
    return clip, preprocess, tokenizer


def test_bundled_has_several_captions_per_image_and_disjoint_splits(micro):
    a = bundled.build_bundled(n_train=200, n_val=30, n_test=50, n_per_class=3, seed=1)
    b = bundled.build_bundled(n_train=200, n_val=30, n_test=50, n_per_class=3, seed=1)
    assert np.array_equal(a.train.images, b.train.images) and a.test.captions == b.test.captions
    assert a.train.images.shape == (200, 16, 16) and a.train.images.dtype == np.uint8
    n_templates = len(bundled.CAPTION_TEMPLATES)
    assert n_templates >= 5 and all(len(c) == n_templates for c in a.test.captions)
    d = a.test.digits[0].tolist()
    assert a.test.captions[0][0] == f"top left {d[0]}, top right {d[1]}, bottom left {d[2]}, bottom right {d[3]}"
    assert a.test.captions[0][1].startswith(f"bottom right {d[3]}")  # the same digits in another order
    evaluation = [c for split in (a.val, a.test) for captions in split.captions for c in captions]
    assert len(set(evaluation)) == len(evaluation)  # every caption names one image of one split
    tuples = {tuple(r) for r in a.val.digits.tolist()}
    assert not tuples & {tuple(r) for r in a.test.digits.tolist()} and len(tuples) == 30
    assert (a.classification.labels[:, None] == a.classification.digits).all()
    c = bundled.build_bundled(n_train=500, n_val=80, n_test=50, n_per_class=3, seed=1)
    assert c.test.captions == a.test.captions and np.array_equal(c.test.images, a.test.images)
    assert a.test.pil(0).mode == "RGB"
    tokenizer = micro[2]
    direct = tokenizer([c for captions in a.train.captions for c in captions]).view(200, n_templates, -1)
    assert torch.equal(a.train.caption_tokens(tokenizer), direct)  # the fast path is the tokenizer


def test_image_text_recall_follows_the_coco_protocol():
    n_images, per_image = 100, 5
    owner = torch.arange(n_images).repeat_interleave(per_image)
    perfect = (owner[None, :] == torch.arange(n_images)[:, None]).float()
    assert set(image_text_recall(perfect, owner).values()) == {1.0}
    shuffle = torch.randperm(len(owner), generator=torch.Generator().manual_seed(0))
    assert set(image_text_recall(perfect[:, shuffle], owner[shuffle]).values()) == {1.0}
    scores = torch.randn(n_images, len(owner), generator=torch.Generator().manual_seed(1))
    assert image_text_recall(scores[:, shuffle], owner[shuffle]) == image_text_recall(scores, owner)
    # each image ranks a caption of the other image first; half of the captions find their image
    scores = torch.tensor([[0.1, 0.2, 0.3, 0.9], [0.8, 0.1, 0.4, 0.2]])
    r = image_text_recall(scores, torch.tensor([0, 0, 1, 1]), ks=(1, 2))
    assert r == {"I->T R@1": 0.0, "T->I R@1": 0.5, "I->T R@2": 0.5, "T->I R@2": 1.0}


def test_image_text_recall_of_random_scores_is_chance():
    """Random scores: I->T R@k = 1 - C(T-c, k) / C(T, k) for c captions of T, T->I R@k = k / N.
    Over 20 draws of 200 images x 5 captions the standard error of each mean is below 0.5 points;
    the tolerance is 4 standard errors."""
    n_images, per_image, trials = 200, 5, 20
    owner = torch.arange(n_images).repeat_interleave(per_image)
    n_texts = len(owner)
    runs = [image_text_recall(torch.rand(n_images, n_texts), owner) for _ in range(trials)]
    for k in (1, 5, 10):
        i2t = 1 - math.comb(n_texts - per_image, k) / math.comb(n_texts, k)
        t2i = k / n_images
        for key, expected, rows in (("I->T", i2t, n_images), ("T->I", t2i, n_texts)):
            mean = float(np.mean([r[f"{key} R@{k}"] for r in runs]))
            stderr = math.sqrt(expected * (1 - expected) / (rows * trials))
            assert abs(mean - expected) <= 4 * stderr, (key, k, mean, expected)


@pytest.mark.parametrize(
    "scores, owner, message",
    [
        (torch.zeros(3), torch.zeros(3, dtype=torch.long), "must be \\[N_images, N_texts\\]"),
        (torch.zeros(2, 3), torch.zeros(2, dtype=torch.long), "one entry per text \\(3\\)"),
        (torch.zeros(2, 3), torch.zeros(3), "integer image rows"),
        (torch.zeros(2, 3), torch.tensor([0, 1, 2]), "must lie in \\[0, 2\\)"),
        (torch.zeros(2, 3), torch.tensor([0, 0, 0]), "1 image rows have no text"),
        (torch.full((1, 1), float("nan")), torch.tensor([0]), "NaN"),
    ],
)
def test_image_text_recall_rejects_inputs_without_meaning(scores, owner, message):
    with pytest.raises(ValueError, match=message):
        image_text_recall(scores, owner)


def test_retrieval_columns_come_from_the_scorer_and_norm_effect_size():
    torch.manual_seed(0)
    images, texts = torch.randn(6, 4), torch.randn(12, 4)
    owner = torch.arange(6).repeat(2)  # the second caption of every image comes after all first ones
    model = ClipMagModel(
        build_open_clip(ClipModelConfig(name="clipmag-micro"))[0],
        build_head("dot"),
        InfoNCE(),
        "image",
        "clipmag-micro",
    )
    metrics = retrieval_metrics(model, images, texts, owner)
    cosine = image_text_recall(
        torch.nn.functional.normalize(images, dim=1) @ torch.nn.functional.normalize(texts, dim=1).t(), owner
    )
    dot = image_text_recall(images @ texts.t(), owner)
    for k in (1, 5, 10):
        assert metrics[f"i2t_r{k}_cosine"] == cosine[f"I->T R@{k}"] and metrics[f"t2i_r{k}_head"] == dot[f"T->I R@{k}"]
    assert (metrics["n_images"], metrics["n_texts"]) == (6, 12)
    norms = torch.tensor([3.0, 1.0, 2.0, 1.5])
    cos = torch.tensor([[1.0, 0.9, 0, 0], [0.9, 1.0, 0, 0], [0, 0, 1.0, 0.9], [0, 0, 0.8, 1.0]])
    assert hardest_negative_norm_d(cos, torch.eye(4, dtype=torch.bool), norms) == pytest.approx(0.0)


@pytest.mark.parametrize("learnable", [True, False])
def test_state_dict_is_open_clips_and_export_round_trips(micro, tmp_path, learnable):
    clip, preprocess, tokenizer = micro
    loss = InfoNCE(scale=10.0, direction="q2d", learnable_scale=learnable)
    model = ClipMagModel(clip, build_head("learnable" if learnable else "qnorm"), loss, "text", "clipmag-micro")
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
    warm, _, _, _ = build_open_clip(ClipModelConfig(name="clipmag-micro", init=str(tmp_path / "export")))
    assert torch.equal(warm.state_dict()["text_projection"], clip.state_dict()["text_projection"])


def test_forward_reports_loss_and_magnitude_stats(micro):
    clip, preprocess, tokenizer = micro
    model = ClipMagModel(clip, build_head("dnorm"), InfoNCE(direction="both"), "image", "clipmag-micro")
    out = model((torch.randn(4, 3, 16, 16).half(), tokenizer(["a", "b", "c", "d"])))
    assert out["loss"].requires_grad and out["loss"].ndim == 0
    for key in (
        "q_norm_mean",
        "d_norm_mean",
        "gamma_q",
        "gamma_d",
        "effective_temperature",
        "image_norm_mean",
        "text_norm_mean",
    ):
        assert key in out


def test_objective_sets_direction_and_query_side():
    cfg = parse_args(["--objective", "t2i", "--norm", "dnorm"])
    assert (cfg.loss.direction, cfg.model.query_side) == ("q2d", "text")
    cfg = parse_args(["--objective", "sym", "--query-side", "text"])
    assert (cfg.loss.direction, cfg.model.query_side) == ("both", "text")
    cfg = parse_args(["--objective", "i2t"])
    assert cfg.model.query_side == "image" and cfg.data.is_bundled
    assert parse_args(["--objective", "sym"]).model.query_side == "image"
    cfg = parse_args(["--train", "x/{0..1}.tar", "--validation", "x/val", "--test", "x/test"])
    assert not cfg.data.is_bundled and (cfg.data.validation, cfg.data.test) == (["x/val"], ["x/test"])


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--objective", "x2y"], "objective"),
        (["--norm", "l2"], "head.name"),
        (["data.batch_sz=4"], "unknown key 'data.batch_sz'"),
        (["--model", "ViT-Q-99"], "unknown open_clip architecture"),
        (["--model", "missing/model.json"], "JSON model config not found"),
        (["data.train=bundled", "--validation", "v"], "data.validation is set but data.train=bundled"),
        (["--train", "t", "--validation", "v", "--test", "v"], "validation would pick the checkpoint"),
        (["--test", "data/test"], "data.test is set but data.train=bundled"),
        (["data.bundled.validation=5000", "data.bundled.test=5001"], "at most 10000 distinct"),
        (["--batch-size", "1"], "batch_size must be >= 2"),
        (["--bogus", "1"], "unknown flag --bogus"),
        (["--objective", "i2t", "--query-side", "text"], "model.query_side=text contradicts objective=i2t"),
        (["--objective", "sym", "loss.direction=q2d"], "loss.direction=q2d contradicts objective=sym"),
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


def test_a_run_folder_resolves_to_the_model_its_results_tested(tmp_path):
    from clipmag.results.record import build_results, write_results
    from clipmag.scoring.head_record import HeadRecord
    from image_text.model.weights import tested_model

    run = tmp_path / "moved-run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "best.pt").write_bytes(b"")
    assert tested_model(run) == run  # still training: no results, the caller takes latest.pt
    record = build_results(
        {}, HeadRecord({"name": "qnorm"}), {"path": "/elsewhere/run/checkpoints/best.pt"}, {}, {}, {}
    )
    write_results(record, run)
    assert tested_model(run) == run / "checkpoints" / "best.pt"  # the recorded file, found in the moved folder
    record["checkpoint"]["path"] = "/elsewhere/run/export"
    write_results(record, run)
    with pytest.raises(FileNotFoundError, match="names the tested model /elsewhere/run/export"):
        tested_model(run)
