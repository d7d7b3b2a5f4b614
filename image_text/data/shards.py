"""Write image-caption data as WebDataset shards: open_clip training shards and CLIP-benchmark sets.

One sample per *image*: ``<key>.png|jpg|...`` with ``<key>.txt`` holding all of its captions, one
per line (+ ``<key>.cls``). That is the layout CLIP-benchmark's ``wds`` retrieval reader expects (it
splits ``txt`` on lines and counts an image as found by any of its captions), and the one our
reader draws a caption per epoch from. Training shards (``<out>/train/shard-000000.tar`` ...) come
with a ``sizes.json`` that open_clip's ``get_dataset_size`` reads. Test sets use CLIP-benchmark's
``wds/`` layout, one folder per task:

    <out>/wds/<name>_retrieval/test/{0..n-1}.tar, test/nshards.txt, dataset_type.txt = retrieval
    <out>/wds/<name>_classification/test/...,     classnames.txt, zeroshot_classification_templates.txt

so that ``clip_benchmark eval --dataset wds/<name>_retrieval --dataset_root <out>/wds/{dataset}``
finds them.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

from PIL import Image

from clipmag.storage.shards import write_tar_shards

IMAGE_EXTENSIONS = ("jpg", "png", "jpeg", "webp")  # the image members a sample may hold (the reader: reading.py)


class Sample(NamedTuple):
    """One image and its captions. ``image``: a PIL image (encoded as the writer's format), encoded
    bytes (stored as they are, in the writer's format), or an image file (its bytes copied, its own
    format: no re-encoding of JPEGs)."""

    key: str
    image: Image.Image | bytes | Path
    captions: str | Sequence[str]
    label: int | None = None


def _image_member(image: Image.Image | bytes | Path, ext: str) -> tuple[str, bytes]:
    if isinstance(image, Path):
        suffix = image.suffix.lower().lstrip(".")
        if suffix not in IMAGE_EXTENSIONS:
            raise ValueError(f"{image}: not an image file this reader takes ({', '.join(IMAGE_EXTENSIONS)})")
        return suffix, image.read_bytes()
    if isinstance(image, bytes):
        return ext, image
    buf = io.BytesIO()
    image.save(buf, format="PNG" if ext == "png" else "JPEG")
    return ext, buf.getvalue()


def caption_text(captions: str | Sequence[str], key: str) -> str:
    """The ``txt`` member: one caption per line, each on one line (inner newlines become spaces)."""
    lines = [" ".join(c.split()) for c in ([captions] if isinstance(captions, str) else captions)]
    lines = [c for c in lines if c]
    if not lines:
        raise ValueError(f"sample {key!r} has no caption")
    return "\n".join(lines)


def write_shards(
    samples: Iterable[Sample],
    directory: str | Path,
    shard_size: int = 1000,
    name_format: str = "shard-{:06d}.tar",
    image_ext: str = "png",
) -> list[Path]:
    """Write ``samples`` into tar shards of ``shard_size``; records ``sizes.json`` beside them."""

    def record(sample: Sample) -> dict[str, str | bytes]:
        key, image, captions, label = sample
        ext, data = _image_member(image, image_ext)
        out: dict[str, str | bytes] = {"__key__": key, ext: data, "txt": caption_text(captions, key)}
        if label is not None:
            out["cls"] = str(int(label))
        return out

    return write_tar_shards((record(s) for s in samples), directory, shard_size, name_format)


def _write_benchmark(samples: Iterable[Sample], root: Path, dataset_type: str, shard_size: int) -> Path:
    paths = write_shards(samples, root / "test", shard_size, name_format="{}.tar")
    (root / "test" / "nshards.txt").write_text(str(len(paths)))
    (root / "dataset_type.txt").write_text(dataset_type)
    return root


def write_benchmark_retrieval(samples: Iterable[Sample], root: str | Path, shard_size: int = 1000) -> Path:
    """A CLIP-benchmark ``wds`` retrieval set at ``root`` (``root/test/N.tar``), all captions per image."""
    unlabelled = (Sample(s.key, s.image, s.captions) for s in samples)
    return _write_benchmark(unlabelled, Path(root), "retrieval", shard_size)


def write_benchmark_classification(
    samples: Sequence[Sample],
    root: str | Path,
    classnames: Sequence[str],
    templates: Sequence[str],
    shard_size: int = 1000,
) -> Path:
    """A CLIP-benchmark ``wds`` classification set (``cls`` labels, class names, templates)."""
    if any(s.label is None for s in samples):
        raise ValueError("classification samples need a class index")
    root = _write_benchmark(samples, Path(root), "classification", shard_size)
    (root / "classnames.txt").write_text("\n".join(classnames) + "\n")
    # CLIP-benchmark formats templates with str.format(c=...)
    (root / "zeroshot_classification_templates.txt").write_text("\n".join(templates) + "\n")
    return root
