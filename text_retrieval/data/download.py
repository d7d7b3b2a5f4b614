"""Fetch the public data sets into the local layouts the loaders and trainers read.

    python -m text_retrieval.data.download bright data/bright                      # 12 tasks, standard
    python -m text_retrieval.data.download bright data/bright --long-documents     # + long documents
    python -m text_retrieval.data.download bright data/bright --reasoning gpt4_reason
    python -m text_retrieval.data.download beir scifact data/beir
    python -m text_retrieval.data.download sts stsbenchmark data/sts
    python -m text_retrieval.data.download msmarco data/msmarco80k                  # the paper's training set
    python -m text_retrieval.data.download msmarco data/msmarco500k --size 500k
    python -m text_retrieval.data.download allnli data/sts                          # data/sts/train.tsv

``python -m text_retrieval.data.download SOURCE --help`` lists a source's flags. The fetchers are in
:mod:`text_retrieval.data.fetch`: offline, the error names the URL and how to place the files by
hand (``--source`` / ``--snapshot``).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from clipmag.config.checks import PositiveInt, Seed
from clipmag.config.command_line import field_flags, parse_cli, require_words
from clipmag.config.entry import run_entry_point
from clipmag.errors import ConfigError
from clipmag.runtime.logs import setup_logging
from text_retrieval.data.fetch import download_allnli, download_beir, download_bright, download_msmarco, download_sts
from text_retrieval.data.loaders.bright import BRIGHT_REVISION

__all__ = ["COMMANDS", "main"]


# ---- the command line: one settings class per source ---------------------------------------------
@dataclass
class BrightCommand:
    """bright ROOT: BRIGHT tasks from the Hugging Face Hub at a pinned revision, as ROOT/<task>/."""

    root: str = ""
    tasks: list[str] = field(default_factory=list)  # empty: every task of the setting
    long_documents: bool = False  # long documents (StackExchange tasks, pony)
    reasoning: list[str] = field(default_factory=list)  # reasoning-query configs, e.g. gpt4_reason
    revision: str = BRIGHT_REVISION
    snapshot: str | None = None  # convert this local copy of the hub repository instead


@dataclass
class BeirCommand:
    """beir NAME ROOT: a BEIR dataset (e.g. scifact, nfcorpus, fiqa) from the BEIR mirror, as ROOT/NAME/."""

    name: str = ""
    root: str = ""


@dataclass
class StsCommand:
    """sts NAME ROOT: an STS set (stsbenchmark or sickr) as ROOT/NAME/."""

    name: str = ""
    root: str = ""
    source: str | None = None  # the archive fetched by hand (e.g. Stsbenchmark.tar.gz)


@dataclass
class MsmarcoCommand:
    """msmarco ROOT: MS MARCO training pairs, shards and a BEIR-layout dev subset (pairs.jsonl, shards/, dev/)."""

    root: str = ""
    size: Literal["80k", "500k"] = "80k"  # v1.1 QA (80k) or passage-ranking judgments (500k)
    source: str | None = None  # convert these files fetched by hand instead
    seed: Seed = 0  # shard shuffle and dev sample seed
    dev_queries: PositiveInt = 500
    dev_corpus: PositiveInt = 50_000  # dev passages in all
    samples_per_shard: PositiveInt = 1000
    overwrite: bool = False  # replace shards already in ROOT/shards


@dataclass
class AllnliCommand:
    """allnli ROOT: SNLI + MultiNLI + STS-B train pairs as ROOT/train.tsv."""

    root: str = ""
    source: str | None = None  # a folder with the archives fetched by hand


def _bright(cmd: BrightCommand) -> Path:
    return download_bright(cmd.root, cmd.tasks or None, cmd.long_documents, cmd.reasoning, cmd.revision, cmd.snapshot)


def _msmarco(cmd: MsmarcoCommand) -> Path:
    options = ("seed", "dev_queries", "dev_corpus", "samples_per_shard", "overwrite")
    manifest = download_msmarco(cmd.root, cmd.size, cmd.source, **{k: getattr(cmd, k) for k in options})
    print(f"{manifest['pairs']} pairs in {manifest['shards']['count']} shards -> {cmd.root} (see manifest.json)")
    return Path(cmd.root)


def _allnli(cmd: AllnliCommand) -> Path:
    manifest = download_allnli(cmd.root, cmd.source)
    print(f"{manifest['pairs']} scored pairs -> {Path(cmd.root) / 'train.tsv'} (counts in train.manifest.json)")
    return Path(cmd.root)


# source -> (its settings, the words before the flags, what it runs)
COMMANDS: dict[str, tuple[type, tuple[str, ...], Callable[[Any], Path]]] = {
    "bright": (BrightCommand, ("root",), _bright),
    "beir": (BeirCommand, ("name", "root"), lambda cmd: download_beir(cmd.name, cmd.root)),
    "sts": (StsCommand, ("name", "root"), lambda cmd: download_sts(cmd.name, cmd.root, cmd.source)),
    "msmarco": (MsmarcoCommand, ("root",), _msmarco),
    "allnli": (AllnliCommand, ("root",), _allnli),
}


def main(argv: Sequence[str] | None = None) -> Path:
    """``python -m text_retrieval.data.download SOURCE ...``: fetch one source; returns its folder."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        raise SystemExit(0 if argv else 2)
    source, rest = argv[0], argv[1:]
    if source not in COMMANDS:
        raise ConfigError(f"command line: unknown source {source!r}; choose one of {', '.join(COMMANDS)}")
    cls, words, run = COMMANDS[source]
    cmd = parse_cli(cls, rest, field_flags(cls), description=cls.__doc__ or "", positional=words)
    require_words(cmd, words)
    setup_logging(level=logging.INFO)
    return run(cmd)


if __name__ == "__main__":
    try:
        run_entry_point(main)
    except ConnectionError as err:  # offline: the message already says what to do
        sys.exit(f"error: {err}")
