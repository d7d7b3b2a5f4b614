"""The image tower's own nearest neighbour (evaluation ``feature-neighbour``): each scored image takes
the class of the training image nearest in the tower's features by cosine, as an independent search
over the same export finds it, scored as the floors are; unlabelled shards and unnamed sets are one
line each."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from clipmag.registry.evaluations import get_evaluation
from clipmag.scoring.heads import build_head
from clipmag.scoring.losses import InfoNCE
from clipmag.storage.shards import ShardError
from image_text.data.reading import read_eval_set
from image_text.data.shards import Sample, write_shards
from image_text.evaluation import feature_neighbour
from image_text.model.architecture import build_open_clip
from image_text.model.clip_model import ClipMagModel
from image_text.model.config import ClipModelConfig
from image_text.model.export import export_open_clip
from image_text.model.loading import load_clipmag


@pytest.fixture(scope="module")
def digits(tmp_path_factory) -> Path:
    """Labelled train (40) and val (20) shards: noisy images of four colours, the colour the class."""
    root = tmp_path_factory.mktemp("labelled")
    rng = np.random.default_rng(0)
    colours = np.array([[200, 30, 30], [30, 200, 30], [30, 30, 200], [200, 200, 30]])
    for split, n in (("train", 40), ("val", 20)):
        labels = rng.integers(0, 4, n)
        noise = rng.integers(-60, 60, (n, 32, 32, 3))
        images = np.clip(colours[labels][:, None, None, :] + noise, 0, 255).astype(np.uint8)
        samples = [Sample(f"{split}{i}", Image.fromarray(images[i]), f"image {i}", int(labels[i])) for i in range(n)]
        write_shards(samples, root / split, shard_size=16)
    return root


@pytest.fixture(scope="module")
def export(tmp_path_factory) -> Path:
    """An untrained micro CLIP under dnorm: its image norms vary, which the cosine neighbour ignores."""
    torch.manual_seed(0)
    clip, _, _, _ = build_open_clip(ClipModelConfig(name="clipmag-micro"))
    model = ClipMagModel(clip, build_head("dnorm"), InfoNCE(scale=10.0), "image", "clipmag-micro")
    return export_open_clip(model, tmp_path_factory.mktemp("export") / "export")


def _by_hand(export: Path, digits: Path) -> tuple[np.ndarray, np.ndarray]:
    """Each validation image's predicted class by an exhaustive cosine search, and its true class."""
    model, preprocess, tokenizer = load_clipmag(export)
    model.eval()
    train = read_eval_set(str(digits / "train"), preprocess, tokenizer, "train")
    val = read_eval_set(str(digits / "val"), preprocess, tokenizer, "val")
    with torch.no_grad():
        pool = F.normalize(model.encode_image(train.images), dim=-1)
        queries = F.normalize(model.encode_image(val.images), dim=-1)
    nearest = [int(torch.argmax(pool @ q)) for q in queries]
    return train.labels[nearest].numpy(), val.labels.numpy()


def test_each_image_takes_its_nearest_training_image_class(digits, export, tmp_path):
    out = tmp_path / "neighbour"
    argv = ["--train", str(digits / "train"), "--data", str(digits / "val"), "--batch_size", "7"]
    get_evaluation("feature-neighbour").run(export, out, argv)  # as a sweep calls it on a cell's export
    record = json.loads((out / "results.json").read_text())
    predicted, labels = _by_hand(export, digits)
    stored = record["sets"]["val"]
    assert stored["predicted"] == predicted.tolist() and stored["labels"] == labels.tolist()
    assert stored["acc1"] == pytest.approx(float((predicted == labels).mean()))
    recalls = [(predicted[labels == c] == c).mean() for c in np.unique(labels)]
    assert stored["mean_per_class_recall"] == pytest.approx(float(np.mean(recalls)))
    assert record["train_images"] == 40 and stored["images"] == 20
    assert record["provenance"]["code"]["commit"]
    result = get_evaluation("feature-neighbour").read(out)
    assert result.metrics["val"] == {"acc1": stored["acc1"], "mean_per_class_recall": stored["mean_per_class_recall"]}
    hits = [v["acc1"] for v in result.outcomes["val"].values()]
    assert len(hits) == 20 and np.mean(hits) == pytest.approx(stored["acc1"])


def test_shards_without_classes_are_refused_by_name(export, tmp_path):
    image = np.zeros((8, 8, 3), dtype=np.uint8)
    write_shards([Sample(f"s{i}", Image.fromarray(image), "a caption") for i in range(3)], tmp_path / "plain")
    argv = ["--train", str(tmp_path / "plain"), "--data", str(tmp_path / "plain"), "--output", str(tmp_path / "o")]
    with pytest.raises(ShardError, match=r"--train .*plain: sample 's0' has no class \(s0\.cls\)"):
        feature_neighbour.main([*argv, "--model", str(export)])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--model", "m", "--output", "o"], "--train, --data required"),
        (["--model", "m", "--train", "t", "--data", "a/val", "b/val", "--output", "o"], "two sets named alike"),
    ],
)
def test_missing_or_clashing_settings_are_one_line(argv, message):
    with pytest.raises(ValueError, match=message):
        feature_neighbour.parse_args(argv)


def test_a_set_is_named_by_its_folder_or_its_shards_folder():
    assert feature_neighbour.set_name("data/emoji/val") == "val"
    assert feature_neighbour.set_name("data/emoji/val/shard-{000000..000002}.tar") == "val"
    assert feature_neighbour.set_name("data/emoji/test/shard-000000.tar") == "test"
