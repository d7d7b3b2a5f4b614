"""A trained image tower's own nearest neighbour: what its image features separate when the labels
are given, read beside zero-shot to say which half of a CLIP falls short.

Zero-shot classification asks two things at once: that the image tower places the images of one
class together, and that the text tower puts each class's prompts where those images lie. The pixel
nearest neighbour of the set's floors (:mod:`image_text.data.baselines`) reads the first without any
learning; this evaluation reads it on the trained tower. Each evaluated image takes the class of the
training image whose image feature is closest in direction (cosine whatever the model's head: the
question is what the features separate, not how a head weighs them), scored as every floor is (top-1
and mean per-class recall). It reads the training labels, so it is no zero-shot figure: a tower
whose neighbour stays at the pixel floor has learnt nothing about class the pixels did not already
give, and a zero-shot far below its neighbour loses the rest in matching prompts to images.

Example (a sweep attaches it as the evaluation kind ``feature-neighbour``)::

    python -m image_text.evaluation.feature_neighbour --model runs/clip/export \\
        --train data/emoji/train --data data/emoji/val --output runs/clip/evaluations/image-neighbour
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clipmag.config.checks import PositiveInt
from clipmag.config.command_line import parse_cli
from clipmag.config.entry import run_entry_point
from clipmag.registry.evaluations import EvaluationResult
from clipmag.results.record import RESULTS_FILE, write_results

if TYPE_CHECKING:  # torch: only once a model is read, never for --help
    import torch

    from image_text.model.clip_model import ClipMagModel

__all__ = ["FeatureNeighbourConfig", "METRICS", "parse_args", "set_name", "main", "read_evaluation", "entry"]

METRICS = ("acc1", "mean_per_class_recall")


@dataclass
class FeatureNeighbourConfig:
    """``model``: an export, checkpoint or run folder; ``train``: the labelled shards whose images
    are the neighbours; ``data``: the labelled shards scored (each by its folder's name);
    ``output``: a folder that receives ``results.json``."""

    model: str = ""
    train: str = ""
    data: list[str] = field(default_factory=list)
    batch_size: PositiveInt = 256
    output: str = ""


SHORTHANDS = {k: k for k in ("model", "train", "data", "batch_size", "output")}


def parse_args(argv: Sequence[str]) -> FeatureNeighbourConfig:
    """``[--flag value ...] [key=value ...]`` -> checked settings."""
    cfg = parse_cli(FeatureNeighbourConfig, argv, SHORTHANDS, description=__doc__)
    missing = [f"--{k}" for k in ("model", "train", "data", "output") if not getattr(cfg, k)]
    if missing:
        raise ValueError(f"feature neighbour: {', '.join(missing)} required (see --help)")
    names = [set_name(spec) for spec in cfg.data]
    if len(set(names)) < len(names):
        raise ValueError(
            f"feature neighbour: --data {' '.join(cfg.data)} holds two sets named alike ({names}); give one each"
        )
    return cfg


def set_name(spec: str) -> str:
    """The name a scored set is stored under: its folder's (``data/emoji/val`` -> ``val``), or its
    shards' folder's for a shard file or a brace or glob pattern."""
    path = Path(spec)
    return path.parent.name if any(c in path.name for c in "{*?[") or path.suffix == ".tar" else path.name


def _directions(model: ClipMagModel, images: torch.Tensor, batch_size: int) -> torch.Tensor:
    """Unit image features, in batches, in fp32 (the retrieval evaluation's encoder)."""
    import torch
    import torch.nn.functional as F

    from image_text.evaluation.retrieval import encode

    return F.normalize(encode(model.encode_image, images, batch_size, torch.device("cpu"), "fp32"), dim=-1)


def main(argv: Sequence[str]) -> dict[str, Any]:
    """Score each ``--data`` set by its nearest training image in the tower's feature space; writes
    ``results.json`` under ``--output`` (each image's predicted class kept for paired tests)."""
    cfg = parse_args(argv)  # --help ends here, before torch loads
    import torch

    from clipmag.config.build import to_dict
    from clipmag.results.provenance import provenance
    from image_text.data.baselines import classification_scores
    from image_text.data.reading import read_labelled_images
    from image_text.model.loading import load_clipmag

    model, preprocess, _ = load_clipmag(cfg.model)
    model.eval()
    train_images, train_labels = read_labelled_images(cfg.train, preprocess, "--train")
    pool = _directions(model, train_images, cfg.batch_size)
    sets: dict[str, Any] = {}
    for spec in cfg.data:
        images, labels = read_labelled_images(spec, preprocess, "--data")
        predicted = train_labels[(_directions(model, images, cfg.batch_size) @ pool.T).argmax(dim=1)]
        scores = classification_scores(predicted.numpy(), labels.numpy())
        sets[set_name(spec)] = {
            "images": len(labels),
            **scores,
            "predicted": predicted.tolist(),
            "labels": labels.tolist(),
        }
    record = {
        "model": cfg.model,
        "train_images": len(train_labels),
        "rule": "1-NN by cosine of the image tower's features over the training images and their classes",
        "sets": sets,
        "settings": to_dict(cfg),
        "torch_threads": torch.get_num_threads(),
    }
    record["provenance"] = provenance(record["settings"])
    Path(cfg.output).mkdir(parents=True, exist_ok=True)
    write_results(record, cfg.output)  # atomic: the sweep reads its presence as "evaluated"
    for name, s in sets.items():
        print(
            f"{name}: image-feature 1-NN top-1 {100 * s['acc1']:.2f}, "
            f"mean per-class recall {100 * s['mean_per_class_recall']:.2f}"
        )
    return record


def read_evaluation(folder: str | Path) -> EvaluationResult:
    """Top-1 and mean per-class recall per set, and each image's hit (``image-<row>``: ``acc1``)."""
    record = json.loads((Path(folder) / RESULTS_FILE).read_text(encoding="utf-8"))
    metrics = {name: {m: float(s[m]) for m in METRICS} for name, s in record["sets"].items()}
    outcomes = {
        name: {f"image-{row}": {"acc1": float(p == y)} for row, (p, y) in enumerate(zip(s["predicted"], s["labels"]))}
        for name, s in record["sets"].items()
    }
    return EvaluationResult(metrics, outcomes)


def entry() -> None:
    """``python -m image_text.evaluation.feature_neighbour``: user errors end with one ``error:`` line."""
    run_entry_point(main)


if __name__ == "__main__":
    entry()
