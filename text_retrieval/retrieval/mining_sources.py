"""What negative mining reads: the (query, positive) samples of ``--data`` and the documents of
``--corpus`` (:mod:`text_retrieval.retrieval.mine_cli`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clipmag.storage.shards import declared_sizes
from text_retrieval.config import BundledDataConfig
from text_retrieval.data.bundled.build import build_bundled
from text_retrieval.data.loaders.beir import is_beir_folder, read_corpus
from text_retrieval.data.loaders.reading import find_file
from text_retrieval.data.training.pairs import pairs_from_beir, pairs_from_jsonl
from text_retrieval.data.training.shards import load_shard, resolve_shards

__all__ = ["BUNDLED", "load_samples", "load_corpus"]

BUNDLED = "bundled"


def _bundled_pairs(root: str | Path) -> list[dict[str, Any]]:
    """The training pairs ``data.train=bundled`` reads: built (or reused) with the trainer's sizes,
    which decide the held-out test modules, so no mined pair comes from a module the trainer tests on."""
    e = BundledDataConfig(root=str(root))
    paths = build_bundled(e.root, n_train=e.train, n_test=e.test, n_dev=e.validation, corpus_size=e.corpus_size, seed=0)
    return pairs_from_jsonl(paths["train_pairs"])


def _shard_samples(folder: Path) -> list[dict[str, Any]]:
    paths = resolve_shards(folder)
    declared = declared_sizes(paths)
    return [sample for path in paths for sample in load_shard(path, declared.get(path))]


def load_samples(
    data: str, split: str = "train", bundled_root: str | Path = BundledDataConfig.root
) -> list[dict[str, Any]]:
    """The (query, positive) samples of ``data``: a pairs jsonl, a shard folder, a BEIR folder
    (the judged pairs of ``split``) or ``bundled``."""
    if data == BUNDLED:
        return _bundled_pairs(bundled_root)
    path = Path(data)
    if path.is_file():
        return pairs_from_jsonl(path)
    if is_beir_folder(path):
        return pairs_from_beir(path, split)
    if path.is_dir() and any(path.glob("*.tar")):
        return _shard_samples(path)
    raise FileNotFoundError(
        f"--data {data}: expected a pairs .jsonl file, a folder of text shards, a BEIR folder or {BUNDLED!r}"
    )


def load_corpus(spec: str) -> list[str]:
    """The document texts of a BEIR ``corpus.jsonl[.gz]`` (or of the folder holding one)."""
    path = Path(spec)
    if path.is_dir():
        found = find_file(path, "corpus.jsonl", "corpus.jsonl.gz")
        if found is None:
            raise FileNotFoundError(f"--corpus {spec}: the folder holds no corpus.jsonl[.gz]")
        path = found
    if not path.is_file():
        raise FileNotFoundError(f"--corpus {spec}: no such BEIR corpus.jsonl")
    return read_corpus(path)[1]
