"""Fetch COCO or Flickr30k with the Karpathy split, in the layout ``make_clip_shards --karpathy`` reads.

    coco:      <root>/dataset_coco.json, <root>/train2014/*.jpg, <root>/val2014/*.jpg
    flickr30k: <root>/dataset_flickr30k.json, <root>/flickr30k-images/*.jpg

Parts already present are not fetched again, and a download goes to a temporary file first, so an
interrupted fetch is never mistaken for a finished one. Without internet the error names the file
to fetch by hand and where to put it. The Flickr30k images are distributed under the terms of the
Flickr30k form (https://shannon.cs.illinois.edu/DenotationGraph/); the URL here is a community
mirror. To use another copy, put its zip at ``<root>/flickr30k-images.zip`` (or the unpacked folder
at ``<root>/flickr30k-images``) before running: present parts are used as they are.
"""

from __future__ import annotations

import logging
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path

from clipmag.storage.fetch import download as fetch_file

logger = logging.getLogger("clipmag")

KARPATHY_URL = "https://cs.stanford.edu/people/karpathy/deepimagesent/caption_datasets.zip"


@dataclass(frozen=True)
class Dataset:
    """Where a dataset's parts come from and where they land under the root."""

    split_file: str
    image_zips: dict[str, str]  # folder the zip unpacks to -> url
    image_root: str  # the folder the split file's names are relative to, under the root


DATASETS = {
    "coco": Dataset(
        "dataset_coco.json",
        {
            "train2014": "http://images.cocodataset.org/zips/train2014.zip",
            "val2014": "http://images.cocodataset.org/zips/val2014.zip",
        },
        "",
    ),
    "flickr30k": Dataset(
        "dataset_flickr30k.json",
        {"flickr30k-images": "https://huggingface.co/datasets/nlphuji/flickr30k/resolve/main/flickr30k-images.zip"},
        "flickr30k-images",
    ),
}


def _unzip_member(archive: Path, member: str, target: Path) -> None:
    with zipfile.ZipFile(archive) as zf:
        found = [n for n in zf.namelist() if Path(n).name == member]
        if not found:
            raise FileNotFoundError(f"{archive} holds no {member}")
        with zf.open(found[0]) as src, open(target, "wb") as out:
            shutil.copyfileobj(src, out)


def download(name: str, root: str | Path) -> tuple[Path, Path]:
    """Fetch dataset ``name`` (``coco`` / ``flickr30k``) into ``root``; returns (split file, image folder)."""
    if name not in DATASETS:
        raise ValueError(f"--download: unknown dataset {name!r}; choose from {', '.join(DATASETS)}")
    spec, root = DATASETS[name], Path(root)
    split_file = root / spec.split_file
    if not split_file.is_file():
        archive = fetch_file(KARPATHY_URL, root / Path(KARPATHY_URL).name)
        _unzip_member(archive, spec.split_file, split_file)
    for folder, url in spec.image_zips.items():
        if (root / folder).is_dir():
            continue
        archive = fetch_file(url, root / f"{folder}.zip")
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(root)
        if not (root / folder).is_dir():
            raise FileNotFoundError(f"{archive} did not unpack to {root / folder}")
        archive.unlink()
    return split_file, root / spec.image_root
