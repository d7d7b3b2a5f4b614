"""Image-text data: shard lookup and checks, sample decoding, evaluation sets (the data settings are
:mod:`image_text.data.config`).

Shards follow open_clip's conventions - tar files whose samples hold an image (``jpg``/``png``/
``jpeg``/``webp``), a caption file (``txt``) and optionally a class index (``cls``), with the sample
counts in ``sizes.json`` - with one addition taken from CLIP-benchmark's retrieval sets: a sample is
one *image* and ``txt`` holds all of its captions, one per line (COCO has five). Training draws one
of them per image per epoch (``stream.py``); evaluation scores every caption
(``image_text.evaluation.retrieval``). A single-line ``txt`` is the one-caption case and reads the same way.

Errors fail loudly. open_clip logs and skips unreadable samples (``log_and_continue``); here every
shard is checked before training starts, shards are read through ``clipmag.storage.shards.read_samples``
(the reader the text front end uses too), and a read error, a count other than ``sizes.json``
declares, an image that does not decode or a sample without a caption raises ``ShardError`` naming
the shard file, the sample key, the member and what is wrong with it.
"""

from __future__ import annotations

import glob
import io
import itertools
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from PIL import Image

from clipmag.storage.shards import (
    ShardError,
    declared_sizes,
    expand_shards,
    listed_samples,
    read_samples,
)

from .shards import IMAGE_EXTENSIONS

CHECKED_SAMPLES = 256  # how far into a shard validate_shards looks for an image-caption sample
SPLIT_FOLDERS = ("train", "val", "validation", "test")


def shard_paths(spec: str, what: str) -> list[str]:
    """Local shard paths of ``spec``: a folder (its ``*.tar``, sorted) or brace patterns.

    Remote urls are refused: resuming by counts needs every shard's sample count before reading.
    """
    if os.path.isdir(spec):
        paths = sorted(glob.glob(os.path.join(spec, "*.tar")))
        if not paths:
            raise ShardError(f"{what}: no shards (*.tar) in the folder {spec}")
        return paths
    paths = expand_shards(spec, what)
    remote = [p for p in paths if "://" in p or p.startswith("pipe:")]
    if remote:
        raise ShardError(
            f"{what}: {remote[0]} is remote; copy the shards to a local folder (the stream needs "
            "each shard's sample count up front)"
        )
    return paths


def shard_sizes(paths: Sequence[str]) -> list[int]:
    """Sample count of each shard: ``sizes.json`` where it lists the shard, else the tar headers."""
    declared = declared_sizes(paths)
    return [declared[p] if p in declared else listed_samples(p) for p in paths]


def dataset_name(spec: str) -> str:
    """A name for the data of ``spec``: its folder, or the folder above a split folder
    (``data/coco/test`` -> ``coco``)."""
    path = Path(spec if os.path.isdir(spec) else expand_shards(spec)[0]).resolve()
    folder = path if path.is_dir() else path.parent
    return folder.parent.name if folder.name in SPLIT_FOLDERS else folder.name


def _has_image_and_caption(sample: dict[str, Any]) -> bool:
    return "txt" in sample and any(ext in sample for ext in IMAGE_EXTENSIONS)


def validate_shards(spec: str, what: str = "data.train") -> list[str]:
    """Resolve ``spec`` and check that every shard is a tar with an image-caption sample, so that a
    bad path fails before the model is built rather than inside a DataLoader worker."""
    paths = shard_paths(spec, what)
    for path in paths:
        if not Path(path).is_file():
            raise ShardError(f"{what}: shard not found: {path}")
        try:
            found = any(_has_image_and_caption(s) for s in itertools.islice(read_samples(path), CHECKED_SAMPLES))
        except ShardError as err:
            raise ShardError(f"{what}: {err}") from None
        if not found:
            raise ShardError(
                f"{what}: {path} holds no sample with an image ({'/'.join(IMAGE_EXTENSIONS)}) and a "
                f"caption (txt) among its first {CHECKED_SAMPLES} samples"
            )
    return paths


@dataclass
class ImageCaptions:
    """One decoded shard sample: the image, its captions and its class (-1 if none)."""

    key: str
    image: Image.Image
    captions: list[str]
    label: int


def _image(data: bytes, member: str, where: str) -> Image.Image:
    """The decoded RGB image of one member; ``ShardError`` saying what is wrong with it."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            return image.convert("RGB")
    except Image.UnidentifiedImageError:
        problem = "is empty" if not data else "is not in an image format PIL reads"
    except Exception as err:  # PIL's decoders raise OSError, SyntaxError, zlib.error, struct.error ...
        problem = f"does not decode ({type(err).__name__}: {err})"
    raise ShardError(f"{where}: its image {member} ({len(data)} bytes) {problem}")


def decode_sample(sample: dict[str, Any]) -> ImageCaptions:
    """A raw shard sample (``read_samples``) -> image, captions and class; ``ShardError`` naming the
    shard file, the sample key and the member that is missing or does not decode."""
    key = sample.get("__key__")
    where = f"shard {sample.get('__url__', '(unknown)')}: sample {key!r}"
    ext = next((e for e in IMAGE_EXTENSIONS if e in sample), None)
    if ext is None or "txt" not in sample:
        found = ", ".join(f"{key}.{e}" for e in sample if not e.startswith("__")) or "no member"
        raise ShardError(
            f"{where} lacks an image ({'/'.join(IMAGE_EXTENSIONS)}) or its captions (txt): it holds {found}"
        )
    image = _image(sample[ext], f"{key}.{ext}", where)
    try:
        captions = [c.strip() for c in sample["txt"].decode("utf-8").splitlines() if c.strip()]
    except UnicodeDecodeError as err:
        raise ShardError(f"{where}: its captions {key}.txt are not UTF-8 text ({err})") from None
    try:
        label = int(sample["cls"]) if "cls" in sample else -1
    except ValueError:
        raise ShardError(f"{where}: its class {key}.cls is not an integer ({sample['cls'][:20]!r})") from None
    if not captions:
        raise ShardError(f"{where}: its captions {key}.txt hold no caption")
    return ImageCaptions(sample["__key__"], image, captions, label)


def flatten_captions(captions: Sequence[Sequence[str]]) -> tuple[list[str], torch.Tensor]:
    """Per-image caption lists -> (all texts, the image row of each text)."""
    texts = [c for group in captions for c in group]
    owner = torch.repeat_interleave(torch.arange(len(captions)), torch.tensor([len(g) for g in captions]))
    return texts, owner


@dataclass
class EvalSet:
    """An evaluation split held in memory: preprocessed images, every caption and its tokens, the
    image row of each caption, and the class of each image (-1 if none).

    Images stay float32, as CLIP-benchmark feeds them, so both give the same cosine numbers (COCO's
    5,000 test images at 224 px take 3 GB)."""

    name: str
    images: torch.Tensor
    texts: list[str]
    tokens: torch.Tensor
    image_of_text: torch.Tensor
    labels: torch.Tensor

    @classmethod
    def from_captions(
        cls,
        name: str,
        images: torch.Tensor,
        captions: Sequence[Sequence[str]],
        labels: torch.Tensor,
        tokenizer: Callable,
    ) -> EvalSet:
        texts, owner = flatten_captions(captions)
        return cls(name, images.float(), texts, tokenizer(texts), owner, labels.long())


def _eval_samples(spec: str, what: str) -> Iterator[ImageCaptions]:
    """Every sample of the shards of ``spec``, in order, decoded (``what`` names the setting)."""
    paths = validate_shards(spec, what)
    sizes = declared_sizes(paths)
    for path in paths:
        for raw in read_samples(path, sizes.get(path)):
            yield decode_sample(raw)


def check_eval_set(spec: str, what: str) -> int:
    """Decode every sample of an evaluation split without keeping it (the ranks that do not evaluate
    stop on a broken sample too); returns the count."""
    return sum(1 for _ in _eval_samples(spec, what))


def caption_owners(spec: str, what: str) -> list[int]:
    """The image row of every caption of the evaluation split ``spec``, in the order and flattening
    the evaluation uses (what a report needs to test the captions of one image as one cluster)."""
    _, owner = flatten_captions([sample.captions for sample in _eval_samples(spec, what)])
    return owner.tolist()


def read_eval_set(spec: str, preprocess: Callable, tokenizer: Callable, what: str) -> EvalSet:
    """Every sample of the shards of ``spec``, in order, with all captions (``what`` names the setting)."""
    images, captions, labels = [], [], []
    for sample in _eval_samples(spec, what):
        images.append(preprocess(sample.image))
        captions.append(sample.captions)
        labels.append(sample.label)
    return EvalSet.from_captions(dataset_name(spec), torch.stack(images), captions, torch.tensor(labels), tokenizer)


def read_labelled_images(spec: str, preprocess: Callable, what: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The preprocessed images of the shards of ``spec``, in order, and their classes; a ``ShardError``
    naming the first sample without a class (``cls``), since a classifier cannot read one."""
    images, labels = [], []
    for sample in _eval_samples(spec, what):
        if sample.label < 0:
            raise ShardError(
                f"{what} {spec}: sample {sample.key!r} has no class ({sample.key}.cls); use labelled shards"
            )
        images.append(preprocess(sample.image))
        labels.append(sample.label)
    if not images:
        raise ShardError(f"{what} {spec}: no sample to read")
    return torch.stack(images), torch.tensor(labels)
