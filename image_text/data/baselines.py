"""What a labelled image-text set gives without learning anything, stored with the set
(``baselines.json`` beside its shards) so every table of a model trained on it can print them.

A zero-shot top-1 means little without its floor: on skewed classes, always naming the training
set's most common class can beat chance many times over, and a nearest neighbour in raw pixels
(each evaluated image takes the class of the training image closest to it, Euclidean distance on
``PIXEL_SIDE``-pixel colour thumbnails) reads what the images give away by their look alone. Each is
scored as zero-shot is (:func:`image_text.evaluation.zero_shot.zero_shot_metrics`): top-1 and mean per-class
recall over the classes the evaluated images hold. Retrieval's floor is a random ranking: R@k's
expected value, exactly, for the set's captions per image.
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Sequence
from math import comb
from pathlib import Path

import numpy as np
from PIL import Image

from .shards import Sample, caption_text

PIXEL_SIDE = 32
RETRIEVAL_KS = (1, 5, 10)


def _pixels(image: Image.Image | bytes | Path) -> np.ndarray:
    """A sample's image as its flattened colour thumbnail in [0, 1]."""
    if not isinstance(image, Image.Image):
        image = Image.open(image if isinstance(image, Path) else io.BytesIO(image))
    thumb = image.convert("RGB").resize((PIXEL_SIDE, PIXEL_SIDE), Image.Resampling.BOX)
    return np.asarray(thumb, dtype=np.float32).reshape(-1) / 255.0


def classification_scores(predicted: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """Top-1 and mean per-class recall (over the classes ``labels`` holds): how every floor, and the
    trained towers' own nearest neighbour (:mod:`image_text.evaluation.feature_neighbour`), is scored."""
    recalls = [float((predicted[labels == c] == c).mean()) for c in np.unique(labels)]
    return {"acc1": float((predicted == labels).mean()), "mean_per_class_recall": float(np.mean(recalls))}


def pixel_nearest_neighbour(train: Sequence[Sample], evaluated: Sequence[Sample]) -> np.ndarray:
    """Each evaluated image's predicted class: that of its nearest training image in pixels."""
    pool = np.stack([_pixels(s.image) for s in train])
    pool_sq = (pool**2).sum(axis=1)
    classes = np.array([s.label for s in train])
    out = []
    for s in evaluated:
        query = _pixels(s.image)
        out.append(classes[int(np.argmin(pool_sq - 2 * pool @ query))])
    return np.array(out)


def random_ranking_recall(captions_per_image: Sequence[int], k: int) -> dict[str, float]:
    """R@k's expected value under a uniformly random ranking: I->T, an image is a hit when any of
    its captions is among k of all captions; T->I, a caption when its image is among k images."""
    n_texts, n_images = sum(captions_per_image), len(captions_per_image)
    i2t = np.mean([1 - comb(n_texts - c, k) / comb(n_texts, k) for c in captions_per_image])
    return {f"i2t_r{k}": float(i2t), f"t2i_r{k}": min(1.0, k / n_images)}


def set_baselines(train: Sequence[Sample], evaluated: Sequence[Sample], n_classes: int) -> dict[str, object]:
    """The floors of one evaluated set: chance, the training majority class and the pixel nearest
    neighbour on its zero-shot classes, and random-ranking retrieval on its captions."""
    labels = np.array([s.label for s in evaluated])
    majority = Counter(s.label for s in train).most_common(1)[0][0]
    captions = [len(caption_text(s.captions, s.key).splitlines()) for s in evaluated]
    retrieval: dict[str, float] = {}
    for k in RETRIEVAL_KS:
        retrieval |= random_ranking_recall(captions, k)
    return {
        "images": len(evaluated),
        "classes_held": int(len(np.unique(labels))),
        "zero_shot": {
            "chance": {"acc1": 1 / n_classes, "mean_per_class_recall": 1 / n_classes},
            "majority_class": classification_scores(np.full(len(labels), majority), labels),
            "pixel_nearest_neighbour": classification_scores(pixel_nearest_neighbour(train, evaluated), labels),
        },
        "retrieval_random_ranking": retrieval,
        "rules": {
            "majority_class": f"always the training split's most common class ({majority})",
            "pixel_nearest_neighbour": f"1-NN, Euclidean, {PIXEL_SIDE}x{PIXEL_SIDE} RGB box-averaged thumbnails",
        },
    }
