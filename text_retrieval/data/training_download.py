"""Fetching the training sets: the ``msmarco`` and ``allnli`` commands of ``text_retrieval.data.download``.

The builders (``msmarco.py``, ``msmarco_passage.py``, ``allnli.py``) convert local copies; this module
fetches those copies into ``<root>/raw`` at their pinned revisions (a file already there is kept), or
takes ``--source DIR``, files placed by hand. Offline, the error is one line naming the URL and
how to place the files instead (:func:`text_retrieval.data.fetch.check_online`).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from clipmag.files import download
from text_retrieval.data.allnli import SOURCES as NLI_SOURCES
from text_retrieval.data.allnli import build_allnli_sts
from text_retrieval.data.fetch import BEIR_URL, check_online, download_beir
from text_retrieval.data.msmarco import MSMARCO_FILES, build_msmarco80k, msmarco_url
from text_retrieval.data.msmarco_passage import build_msmarco500k

__all__ = ["COMMANDS", "add_parsers", "download_allnli", "download_msmarco", "run"]

COMMANDS = ("msmarco", "allnli")


def _fetch(url: str, target: Path, hint: str) -> Path:
    """``url`` to ``target`` unless it is there; offline, the one-line error of :func:`check_online`."""
    if not target.is_file():
        check_online(url, hint=hint)
        download(url, target)
    return target


def download_msmarco(root: str | Path, size: str = "80k", source: str | Path | None = None, **build: Any) -> dict:
    """Build MS MARCO 80K (v1.1 QA, pinned revision) or 500K (BEIR's passage-ranking folder) in ``root``.

    ``source``: a local copy to convert instead of fetching into ``root/raw`` (80K: the hub layout
    ``v1.1/{train,validation}-*.parquet``; 500K: an unpacked BEIR ``msmarco`` folder). ``build``:
    the builder's options (seed, dev sizes, samples per shard, overwrite). Returns the manifest.
    """
    root = Path(root)
    if size == "80k":
        if source is None:
            files = " and ".join(MSMARCO_FILES.values())
            hint = f"download {files} on a connected machine and pass the folder holding v1.1/ as --source DIR"
            for file in MSMARCO_FILES.values():
                _fetch(msmarco_url(file), root / "raw" / file, hint)
            source = root / "raw"
        return build_msmarco80k(source, root, **build)
    if size != "500k":
        raise ValueError(f"unknown MS MARCO size {size!r}; known: 80k, 500k")
    if source is None:
        hint = f"fetch {BEIR_URL.format(name='msmarco')} on a connected machine, unzip it and pass --source msmarco/"
        source = download_beir("msmarco", root / "raw", hint)
    return build_msmarco500k(source, root, **build)


def download_allnli(root: str | Path, source: str | Path | None = None) -> dict:
    """``root/train.tsv``: SNLI + MultiNLI + STS-B train pairs scored on [0, 1] (``allnli.py``).

    ``source``: a folder holding the three archives (or their unpacked files) fetched by hand;
    without it they are fetched into ``root/raw``. Returns the manifest.
    """
    root = Path(root)
    if source is None:
        names = ", ".join(spec.url for spec in NLI_SOURCES.values())
        hint = f"fetch {names} on a connected machine and pass their folder as --source DIR"
        for spec in NLI_SOURCES.values():
            _fetch(spec.url, root / "raw" / spec.archive, hint)
        source = root / "raw"
    return build_allnli_sts(source, root / "train.tsv")


def add_parsers(sources: argparse._SubParsersAction) -> None:
    """The ``msmarco`` and ``allnli`` commands of ``python -m text_retrieval.data.download``."""
    msmarco = sources.add_parser("msmarco", help="MS MARCO training pairs, shards and a BEIR-layout dev subset")
    msmarco.add_argument("root", help="output folder, e.g. data/msmarco80k (pairs.jsonl, shards/, dev/)")
    msmarco.add_argument("--size", choices=("80k", "500k"), default="80k", help="v1.1 QA (80k) or passage (500k)")
    msmarco.add_argument("--source", default=None, help="convert these files fetched by hand instead")
    msmarco.add_argument("--seed", type=int, default=0, help="shard shuffle and dev sample seed")
    msmarco.add_argument("--dev-queries", type=int, default=500, help="dev queries sampled (default: %(default)s)")
    msmarco.add_argument("--dev-corpus", type=int, default=50_000, help="dev passages in all (default: %(default)s)")
    msmarco.add_argument("--samples-per-shard", type=int, default=1000)
    msmarco.add_argument("--overwrite", action="store_true", help="replace shards already in ROOT/shards")
    allnli = sources.add_parser("allnli", help="SNLI + MultiNLI + STS-B train pairs as ROOT/train.tsv")
    allnli.add_argument("root", help="output folder, e.g. data/sts")
    allnli.add_argument("--source", default=None, help="a folder with the archives fetched by hand")


def run(args: argparse.Namespace) -> dict:
    """Build what the parsed command asks for and print its count; returns the manifest."""
    if args.command == "allnli":
        manifest = download_allnli(args.root, args.source)
        print(f"{manifest['pairs']} scored pairs -> {Path(args.root) / 'train.tsv'} (counts in train.manifest.json)")
        return manifest
    options = ("seed", "dev_queries", "dev_corpus", "samples_per_shard", "overwrite")
    manifest = download_msmarco(args.root, args.size, args.source, **{k: getattr(args, k) for k in options})
    print(f"{manifest['pairs']} pairs in {manifest['shards']['count']} shards -> {args.root} (see manifest.json)")
    return manifest
