"""WebDataset shards of (query, positive, hard negatives) for the text trainer: writer and reader.

Each sample is one ``<key>.json`` member holding ``{"query", "positive", "negatives"}``; shards are
``shard-000000.tar``, ... with a ``sizes.json`` (shard name -> sample count, as open_clip reads it).

The reader is the core's addressable stream (``clipmag.shard_stream``): endless, split across
ranks and DataLoader workers, and resumable at any step by counts; every rank yields a full batch
every step (``all_gather`` needs equal sizes).

Writing, pattern expansion, ``sizes.json``, the count check and the tar reading are the ones the
image-text front end uses (``clipmag.shards``); a broken shard is a ``ShardError`` naming it.
"""

from __future__ import annotations

import glob
import json
import logging
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from clipmag.shard_stream import AddressableShardStream
from clipmag.shards import (
    SIZES_FILE,
    ShardError,
    declared_sizes,
    expand_shards,
    listed_samples,
    read_samples,
    write_tar_shards,
)

logger = logging.getLogger("clipmag")

CorruptShardError = ShardError  # the name this reader's errors had before both front ends shared one


def _clean_sample(sample: Mapping[str, Any], where: str) -> dict[str, Any]:
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
            raise FileNotFoundError(f"no WebDataset shards (*.tar) in directory {spec}")
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
    return paths


def load_shard(path: str, expected: int | None = None) -> list[dict[str, Any]]:
    """All samples of one shard, in stored order; ``expected`` is the count ``sizes.json`` declares.

    ``ShardError`` naming the shard when it cannot be read, holds another number of samples, or
    holds a sample that is not one ``<key>.json`` of ``{"query", "positive", "negatives"}``.
    """
    raw = list(read_samples(path, expected))
    try:
        return [_clean_sample(json.loads(s["json"]), f"sample {s['__key__']}") for s in raw]
    except (KeyError, ValueError) as exc:
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
