"""Write image-caption data as WebDataset shards: open_clip training shards and CLIP-benchmark sets.

Training shards (``<out>/train/shard-000000.tar`` ...) hold ``<key>.png|jpg`` + ``<key>.txt``
(+ ``<key>.cls``) and a ``sizes.json`` that open_clip's ``get_dataset_size`` reads. Test sets use
CLIP-benchmark's ``wds/`` layout, one folder per task:

    <out>/wds/<name>_retrieval/test/{0..n-1}.tar, test/nshards.txt, dataset_type.txt = retrieval
    <out>/wds/<name>_classification/test/...,     classnames.txt, zeroshot_classification_templates.txt

so that ``clip_benchmark eval --dataset wds/<name>_retrieval --dataset_root <out>/wds/{dataset}``
finds them. Retrieval samples also carry the caption in ``txt`` (one caption per line).
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
from PIL import Image

from clipmag.shards import write_tar_shards

Sample = tuple[str, Image.Image | bytes, str, int | None]  # key, image (PIL or encoded bytes), caption, class


def _encode(image: Image.Image | bytes, ext: str) -> bytes:
    if isinstance(image, bytes):
        return image
    buf = io.BytesIO()
    image.save(buf, format="PNG" if ext == "png" else "JPEG")
    return buf.getvalue()


def write_shards(samples: Iterable[Sample], directory: str | Path, shard_size: int = 1000,
                 name_format: str = "shard-{:06d}.tar", image_ext: str = "png") -> list[Path]:
    """Write ``samples`` into tar shards of ``shard_size``; records ``sizes.json`` beside them."""
    records = (
        {"__key__": key, image_ext: _encode(image, image_ext), "txt": caption,
         **({"cls": str(int(label))} if label is not None else {})}
        for key, image, caption, label in samples
    )
    return write_tar_shards(records, directory, shard_size, name_format)


def write_benchmark_retrieval(samples: Sequence[Sample], root: str | Path, shard_size: int = 1000) -> Path:
    """A CLIP-benchmark ``wds`` retrieval set at ``root`` (``root/test/N.tar``)."""
    root = Path(root)
    paths = write_shards(samples, root / "test", shard_size, name_format="{}.tar")
    (root / "test" / "nshards.txt").write_text(str(len(paths)))
    (root / "dataset_type.txt").write_text("retrieval")
    return root


def write_benchmark_classification(samples: Sequence[Sample], root: str | Path, classnames: Sequence[str],
                                   templates: Sequence[str], shard_size: int = 1000) -> Path:
    """A CLIP-benchmark ``wds`` classification set (``cls`` labels, class names, templates)."""
    if any(s[3] is None for s in samples):
        raise ValueError("classification samples need a class index")
    root = Path(root)
    paths = write_shards(samples, root / "test", shard_size, name_format="{}.tar")
    (root / "test" / "nshards.txt").write_text(str(len(paths)))
    (root / "dataset_type.txt").write_text("classification")
    (root / "classnames.txt").write_text("\n".join(classnames) + "\n")
    # CLIP-benchmark formats templates with str.format(c=...)
    (root / "zeroshot_classification_templates.txt").write_text("\n".join(templates) + "\n")
    return root


def read_caption_file(path: str | Path) -> list[tuple[str, str, int | None]]:
    """``filename<TAB>caption[<TAB>class index]`` per line (``#`` comments and blank lines skipped)."""
    rows = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.rstrip("\n").split("\t")
        if len(parts) not in (2, 3) or not parts[1].strip():
            raise ValueError(f"{path}:{n}: expected 'filename<TAB>caption[<TAB>class]', got {line!r}")
        rows.append((parts[0], parts[1].strip(), int(parts[2]) if len(parts) == 3 else None))
    if not rows:
        raise ValueError(f"{path}: no captions")
    return rows


def folder_samples(image_dir: str | Path, rows: Sequence[tuple[str, str, int | None]]) -> list[Sample]:
    """Samples whose images are files of ``image_dir`` (bytes kept as they are: no re-encoding)."""
    image_dir = Path(image_dir)
    out: list[Sample] = []
    for i, (name, caption, label) in enumerate(rows):
        path = image_dir / name
        if not path.is_file():
            raise FileNotFoundError(f"image listed in the captions file not found: {path}")
        out.append((f"{i:08d}", Image.open(path).convert("RGB"), caption, label))
    return out


def split_samples(samples: Sequence[Sample], test_fraction: float, seed: int = 0) -> tuple[list[Sample], list[Sample]]:
    """Seeded random train / test split."""
    order = np.random.default_rng(seed).permutation(len(samples))
    n_test = int(round(len(samples) * test_fraction))
    return [samples[i] for i in order[n_test:]], [samples[i] for i in order[:n_test]]
