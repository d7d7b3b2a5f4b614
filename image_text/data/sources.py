"""Image-caption sources for the shard builder, and the split by image.

Captions come per image: a captions file lists one caption a line and repeats an image's file name
for each of its captions (``filename<TAB>caption[<TAB>class]``), a Karpathy split file
(``dataset_coco.json``, ``dataset_flickr30k.json``: the standard COCO and Flickr30k retrieval
splits) lists each image with its sentences and its split. Splits are made by image, never by
caption, so no image is on two sides; ``splits_record`` is what the builder writes to
``splits.json`` beside the shards.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from clipmag.storage.user_files import preview, read_utf8

SPLITS = ("train", "val", "test")
KARPATHY_SPLITS = {"train": "train", "restval": "train", "val": "val", "test": "test"}


@dataclass
class ImageEntry:
    """One image of a source: its path relative to the image folder, its captions, its class
    (None if unlabelled) and the split the source gives it (None if the source gives none)."""

    name: str
    captions: list[str]
    label: int | None = None
    split: str | None = None


def read_caption_file(path: str | Path) -> list[ImageEntry]:
    """``filename<TAB>caption[<TAB>class]`` per line (``#`` comments and blank lines skipped); lines
    with the same file name are captions of one image, kept in the order of first appearance."""
    entries: dict[str, ImageEntry] = {}
    first_line: dict[str, int] = {}
    for n, line in enumerate(read_utf8(path).splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) not in (2, 3) or not parts[0].strip() or not parts[1].strip():
            raise ValueError(f"{path}:{n}: expected 'filename<TAB>caption[<TAB>class]', got {preview(line)}")
        name, caption = parts[0].strip(), parts[1].strip()
        try:
            label = int(parts[2]) if len(parts) == 3 else None
        except ValueError:
            raise ValueError(f"{path}:{n}: the class must be an integer index, got {parts[2]!r}") from None
        entry = entries.setdefault(name, ImageEntry(name, [], label))
        first_line.setdefault(name, n)
        if entry.label != label:
            raise ValueError(
                f"{path}:{n}: {name} has class {label}, but line {first_line[name]} gave it class {entry.label}"
            )
        entry.captions.append(caption)
    if not entries:
        raise ValueError(f"{path}: no captions")
    return list(entries.values())


def read_karpathy(path: str | Path) -> list[ImageEntry]:
    """The images of a Karpathy split file with their raw sentences and split (``restval`` joins
    train, as is standard); file names include the ``filepath`` folder where one is given (COCO)."""
    text = read_utf8(path)
    try:
        images = json.loads(text)["images"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{path}: expected a Karpathy split file, a JSON object with 'images' ({err})") from None
    entries = []
    for i, image in enumerate(images):
        try:
            name = str(Path(image.get("filepath", "")) / image["filename"])
            captions = [str(s["raw"]).strip() for s in image["sentences"]]
            split = KARPATHY_SPLITS[image["split"]]
        except (KeyError, TypeError, AttributeError) as err:
            raise ValueError(
                f"{path}: images[{i}]: expected 'filename', 'sentences' (each with 'raw') and 'split' "
                f"(one of {', '.join(KARPATHY_SPLITS)}); problem: {err!r}"
            ) from None
        entries.append(ImageEntry(name, captions, None, split))
    if not entries:
        raise ValueError(f"{path}: no images")
    return entries


def split_by_image(
    entries: Sequence[ImageEntry], val_fraction: float, test_fraction: float, seed: int
) -> dict[str, list[ImageEntry]]:
    """A seeded random train / val / test split of the images (each image with all its captions)."""
    if not (0 <= val_fraction < 1 and 0 <= test_fraction < 1 and val_fraction + test_fraction < 1):
        raise ValueError(
            f"--val-fraction {val_fraction} and --test-fraction {test_fraction} must be in [0, 1) and sum below 1"
        )
    order = np.random.default_rng(seed).permutation(len(entries))
    n_test, n_val = (int(round(len(entries) * f)) for f in (test_fraction, val_fraction))
    if n_test + n_val >= len(entries):
        raise ValueError(f"{len(entries)} images leave none for training with these fractions")
    parts = {"test": order[:n_test], "val": order[n_test : n_test + n_val], "train": order[n_test + n_val :]}
    return {split: [entries[i] for i in parts[split]] for split in SPLITS}


def given_splits(entries: Sequence[ImageEntry], seed: int) -> dict[str, list[ImageEntry]]:
    """The split the source gives each image; the training images in a seeded order (the shard
    stream only shuffles inside a shard, so a sorted source must not stay sorted)."""
    out = {split: [e for e in entries if e.split == split] for split in SPLITS}
    order = np.random.default_rng(seed).permutation(len(out["train"]))
    out["train"] = [out["train"][i] for i in order]
    return out
