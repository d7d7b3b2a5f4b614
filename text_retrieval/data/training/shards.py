"""WebDataset shards of (query, positive, hard negatives) for the text trainer: writer and reader.

Each sample is one ``<key>.json`` member holding ``{"query", "positive", "negatives"}``; shards are
``shard-000000.tar``, ... with a ``sizes.json`` (shard name -> sample count, as open_clip reads it).

The reader is the core's addressable stream (``clipmag.storage.shard_stream``): endless, split across
ranks and DataLoader workers, and resumable at any step by counts; every rank yields a full batch
every step (``all_gather`` needs equal sizes).

Writing, pattern expansion, ``sizes.json``, the count check and the tar reading are the ones the
image-text front end uses (``clipmag.storage.shards``); a broken shard is a ``ShardError`` naming it. Data
that was never made into shards (a pairs ``.jsonl``, a BEIR folder, a folder without shards, a tar
of other files) is refused up front with the ``clipmag-make-text-shards`` command that builds them.
"""

from __future__ import annotations

import glob
import itertools
import json
import logging
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from clipmag.storage.shard_stream import AddressableShardStream
from clipmag.storage.shards import (
    SIZES_FILE,
    ShardError,
    declared_sizes,
    expand_shards,
    listed_samples,
    read_samples,
    write_tar_shards,
)
from text_retrieval.data.loaders.beir import is_beir_folder

logger = logging.getLogger("clipmag")

CorruptShardError = ShardError  # the name this reader's errors had before both front ends shared one
_JSON_SUFFIXES = (".jsonl", ".json", ".jsonl.gz", ".json.gz")
_MAKE_SHARDS = "clipmag-make-text-shards"  # the console script of scripts/make_text_shards.py


def _how_to_build(source: str | Path | None = None) -> str:
    """The command that builds shards from ``source`` (a pairs jsonl, a BEIR folder or a folder
    holding a jsonl; a placeholder otherwise) and the setting that then trains on them."""
    path = Path(source) if source is not None else None
    out, option = "SHARD_DIR", "--jsonl PAIRS.jsonl"
    if path is not None and path.is_dir():
        pairs = sorted(path.glob("*.jsonl"))
        out = f"{path}-shards"
        option = f"--beir {path}" if is_beir_folder(path) else f"--jsonl {pairs[0]}" if pairs else option
    elif path is not None and path.name.endswith(_JSON_SUFFIXES):
        out, option = str(path.parent / f"{path.name.split('.')[0]}-shards"), f"--jsonl {path}"
    other = " (--beir FOLDER for a BEIR folder)" if option == "--jsonl PAIRS.jsonl" else ""
    return (
        f"build shards with `{_MAKE_SHARDS} {out} {option}` or `python scripts/make_text_shards.py {out} {option}`"
        f"{other}, then train with data.train={out}"
    )


def _clean_sample(sample: Mapping[str, Any], where: str) -> dict[str, Any]:
    if not isinstance(sample, Mapping):
        raise ValueError(f'{where}: expected a JSON object {{"query", "positive", "negatives"}}, found {sample!r:.80}')
    query, positive = sample.get("query"), sample.get("positive")
    negatives = sample.get("negatives") or []
    if not isinstance(query, str) or not query.strip():
        raise ValueError(f"{where}: 'query' must be a non-empty string")
    if not isinstance(positive, str) or not positive.strip():
        raise ValueError(f"{where}: 'positive' must be a non-empty string")
    if not isinstance(negatives, list) or not all(isinstance(n, str) for n in negatives):
        raise ValueError(f"{where}: 'negatives' must be a list of strings")
    return {"query": query, "positive": positive, "negatives": negatives}


def write_text_shards(
    samples: Iterable[Mapping[str, Any]],
    out_dir: str | Path,
    samples_per_shard: int = 1000,
    *,
    overwrite: bool = False,
) -> list[Path]:
    """Write samples (``query``, ``positive``, optional ``negatives``) as shards plus ``sizes.json``.

    Samples keep their order (shuffle before writing if the source is sorted: the reader only
    shuffles within shards and permutes shard order). Byte-identical output for identical input.
    Existing shards in ``out_dir`` are an error unless ``overwrite``, which removes them first.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    old = sorted(out.glob("shard-*.tar"))
    if old and not overwrite:
        raise FileExistsError(f"{out} already holds {len(old)} shards; pass overwrite=True to replace them")
    iterator = iter(samples)
    first = next(iterator, None)
    if first is None:
        raise ValueError(f"no samples to write to {out}")
    for path in old + [out / SIZES_FILE]:
        path.unlink(missing_ok=True)
    records = (
        {"__key__": f"{i:09d}", "json": json.dumps(_clean_sample(sample, f"sample {i}"), ensure_ascii=False)}
        for i, sample in enumerate(_chain(first, iterator))
    )
    paths = write_tar_shards(records, out, samples_per_shard)
    logger.info("wrote %d shards to %s", len(paths), out)
    return paths


def _chain(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    yield first
    yield from rest


def resolve_shards(spec: str | Path | Sequence[str | Path]) -> list[str]:
    """Shard paths from a directory (its ``*.tar``), a glob, a brace pattern or a list, sorted."""
    if isinstance(spec, (list, tuple)):
        paths = [str(p) for p in spec]
    elif Path(spec).is_dir():
        paths = sorted(glob.glob(os.path.join(str(spec), "*.tar")))
        if not paths:
            raise FileNotFoundError(f"no WebDataset shards (*.tar) in directory {spec}; {_how_to_build(spec)}")
        return paths
    elif any(c in str(spec) for c in "*?["):
        paths = sorted(glob.glob(str(spec)))
    else:
        paths = expand_shards(str(spec), what="text shards")
    if not paths:
        raise FileNotFoundError(f"no WebDataset shards match {spec}")
    missing = [p for p in paths if not os.path.isfile(p)]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise FileNotFoundError(f"shard not found: {missing[0]}{more}")
    unbuilt = [p for p in paths if p.endswith(_JSON_SUFFIXES)]
    if unbuilt:
        raise ShardError(f"{unbuilt[0]} is a JSON file, not WebDataset shards: {_how_to_build(unbuilt[0])}")
    return paths


def _not_text_shard(path: str, sample: Mapping[str, Any]) -> ShardError:
    members = ", ".join(f"{sample['__key__']}.{ext}" for ext in sample if not ext.startswith("__"))
    return ShardError(
        f"{path} is not a text shard: its sample {sample['__key__']!r} holds {members or 'nothing'} where text "
        f'shards hold one <key>.json of {{"query", "positive", "negatives"}}; {_how_to_build()}'
    )


def _check_first_shard(path: str) -> None:
    """Read the first sample of ``path``: a file that is no tar, or a tar of other files, fails
    here with the command that builds shards, before training starts rather than at its first step."""
    try:
        first = next(itertools.islice(read_samples(path), 1), None)
    except ShardError as exc:
        raise ShardError(f"{exc}; if it is not a shard, {_how_to_build()}") from exc
    if first is not None and "json" not in first:
        raise _not_text_shard(path, first)


def load_shard(path: str, expected: int | None = None) -> list[dict[str, Any]]:
    """All samples of one shard, in stored order; ``expected`` is the count ``sizes.json`` declares.

    ``ShardError`` naming the shard when it cannot be read, holds another number of samples, or
    holds a sample that is not one ``<key>.json`` of ``{"query", "positive", "negatives"}``.
    """
    raw = list(read_samples(path, expected))
    unlike = next((s for s in raw if "json" not in s), None)
    if unlike is not None:
        raise _not_text_shard(path, unlike)
    try:
        return [_clean_sample(json.loads(s["json"]), f"sample {s['__key__']}") for s in raw]
    except ValueError as exc:
        raise ShardError(f"corrupt shard {path}: {type(exc).__name__}: {exc}") from exc


class TextShardStream(AddressableShardStream):
    """Endless, deterministic micro-batches ``{"query", "positive", "negatives"}`` for one rank.

    ``batches(start_step)`` yields the batches of steps ``start_step, start_step + 1, ...``.
    With ``num_workers > 0`` they are read by that many DataLoader workers. A corrupt shard is an
    error naming it; with ``allow_corrupt`` every shard is checked up front and the bad ones are
    skipped with a warning (``skipped_shards`` lists them).
    """

    salt = 1_000_003

    def __init__(
        self,
        shard_dir_or_pattern: str | Path | Sequence[str | Path],
        batch_size: int,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
        num_workers: int = 0,
        allow_corrupt: bool = False,
    ) -> None:
        paths = resolve_shards(shard_dir_or_pattern)
        if not allow_corrupt:  # with it, every shard is read below and the bad ones are skipped
            _check_first_shard(paths[0])
        self.skipped_shards: list[str] = []
        sizes = {}
        if allow_corrupt:
            declared = declared_sizes(paths)
            for p in paths:
                try:
                    sizes[p] = len(load_shard(p, declared.get(p)))
                except ShardError as exc:
                    self.skipped_shards.append(p)
                    logger.warning("%s; skipping it", exc)
            if self.skipped_shards:
                logger.warning("skipped %d of %d shards as corrupt", len(self.skipped_shards), len(paths))
        else:
            declared = declared_sizes(paths)  # else the tar headers: no shard is decoded up front
            sizes = {p: declared[p] if p in declared else listed_samples(p) for p in paths}
        shards = [p for p in paths if sizes.get(p, 0) > 0]
        if not shards:
            raise ValueError(f"no readable samples in the shards of {shard_dir_or_pattern}")
        super().__init__(shards, [sizes[p] for p in shards], batch_size, seed, rank, world_size, num_workers)

    def read_shard(self, index: int) -> list[dict[str, Any]]:
        return load_shard(self.shards[index], self.sizes[index])

    def collate(self, samples: list[dict[str, Any]]) -> dict[str, list]:
        return {
            "query": [s["query"] for s in samples],
            "positive": [s["positive"] for s in samples],
            "negatives": [list(s["negatives"]) for s in samples],
        }
