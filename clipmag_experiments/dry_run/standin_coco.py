"""A stand-in for MS-COCO with the Karpathy split, in the layout ``make_clip_shards --karpathy`` reads.

``<root>/dataset_coco.json`` as Karpathy's ``caption_datasets.zip`` ships it (``images``: each with
``filepath``, ``filename``, ``imgid``, ``cocoid``, ``split`` in train / restval / val / test and five
``sentences`` with ``raw``, ``tokens``, ``sentid``) and the JPEGs where COCO's zips unpack them,
``<root>/train2014/COCO_train2014_<id>.jpg`` (train) and ``<root>/val2014/COCO_val2014_<id>.jpg``
(restval, val and test, which Karpathy drew from COCO's val2014). A dry run of the paper's CLIP
config turns it into shards with the real builder. Each image is a coloured shape on a background
that its captions name, so the captions describe their image.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from PIL import Image, ImageDraw

__all__ = ["KARPATHY_COUNTS", "write_karpathy_coco"]

KARPATHY_COUNTS = {"train": 48, "restval": 8, "val": 8, "test": 16}
COLOURS = {"red": (200, 30, 30), "green": (30, 160, 60), "blue": (40, 60, 200), "yellow": (230, 210, 40)}
SHAPES = ("circle", "square", "triangle")
TEMPLATES = (
    "a {colour} {shape} on a {ground} background",
    "a photo of a {colour} {shape}",
    "there is a {shape} coloured {colour} in the picture",
    "a {ground} picture with one {colour} {shape}",
    "the {colour} {shape} sits in the middle",
)


def _draw(shape: str, colour: str, ground: str, size: int, rng: random.Random) -> Image.Image:
    image = Image.new("RGB", (size, size), COLOURS[ground])
    draw = ImageDraw.Draw(image)
    margin = rng.randint(size // 8, size // 4)
    box = (margin, margin, size - margin, size - margin)
    if shape == "circle":
        draw.ellipse(box, fill=COLOURS[colour])
    elif shape == "square":
        draw.rectangle(box, fill=COLOURS[colour])
    else:
        draw.polygon(
            [(size // 2, margin), (margin, size - margin), (size - margin, size - margin)], fill=COLOURS[colour]
        )
    return image


def write_karpathy_coco(root: str | Path, counts: dict[str, int] | None = None, size: int = 64, seed: int = 0) -> Path:
    """Write ``dataset_coco.json`` and its images under ``root``; returns the split file's path."""
    root, rng = Path(root), random.Random(seed)
    images, sentence_id, image_id = [], 0, 0
    for split, count in (counts or KARPATHY_COUNTS).items():
        folder = "train2014" if split == "train" else "val2014"
        (root / folder).mkdir(parents=True, exist_ok=True)
        for _ in range(count):
            coco_id = 100_000 + image_id
            shape, colour = rng.choice(SHAPES), rng.choice(list(COLOURS))
            ground = rng.choice([c for c in COLOURS if c != colour])
            filename = f"COCO_{folder}_{coco_id:012d}.jpg"
            _draw(shape, colour, ground, size, rng).save(root / folder / filename, format="JPEG", quality=90)
            sentences = []
            for template in TEMPLATES:
                raw = template.format(colour=colour, shape=shape, ground=ground)
                sentences.append({"tokens": raw.split(), "raw": raw, "imgid": image_id, "sentid": sentence_id})
                sentence_id += 1
            images.append(
                {
                    "filepath": folder,
                    "sentids": [s["sentid"] for s in sentences],
                    "filename": filename,
                    "imgid": image_id,
                    "split": split,
                    "sentences": sentences,
                    "cocoid": coco_id,
                }
            )
            image_id += 1
    split_file = root / "dataset_coco.json"
    split_file.write_text(json.dumps({"images": images, "dataset": "coco"}), encoding="utf-8")
    return split_file
