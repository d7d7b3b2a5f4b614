"""WebDataset shards of (query, positive, hard negatives) for the text trainer: writer and reader.

Each sample is one ``<key>.json`` member holding ``{"query", "positive", "negatives"}``; shards are
``shard-000000.tar``, ... with a ``sizes.json`` (shard name -> sample count, as open_clip reads it).

The reader is an endless, resampled stream that is split across ranks and DataLoader workers and
is *addressable*: the batch of any step is a pure function of (shards, seed, batch size, world
size, workers), so ``batches(start_step=k)`` yields exactly what an uninterrupted run yields from
step ``k`` on, and every rank yields a full batch every step (``all_gather`` needs equal sizes).
webdataset's ``split_by_node``/``split_by_worker``/``ResampledShards`` do the same job but keep
their position in iterator state, which a resumed run cannot recover; here the position is
arithmetic instead:

* the shard sequence is an endless concatenation of seeded permutations of all shards, one per
  epoch; position ``p`` of it goes to logical stream ``p mod S`` with ``S = world_size * W`` and
  ``W = max(1, num_workers)``, so within one epoch every shard goes to exactly one stream;
* a stream reads its shards in turn, each shuffled by a permutation seeded with its position;
* rank ``r`` takes step ``t`` from its stream ``r * W + t mod W`` - the order in which a
  DataLoader collects batches from its workers - so samples seen after ``t`` steps are exactly
  ``t * batch_size * world_size``.

Resuming skips whole shards by their sizes and reads only the shard it resumes inside.
The order depends on ``num_workers``: resume with the value the run started with.

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

import numpy as np
import torch

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


def _identity(x: Any) -> Any:
    return x


class TextShardStream:
    """Endless, deterministic micro-batches ``{"query", "positive", "negatives"}`` for one rank.

    ``batches(start_step)`` yields the batches of steps ``start_step, start_step + 1, ...``.
    With ``num_workers > 0`` they are read by that many DataLoader workers. A corrupt shard is an
    error naming it; with ``allow_corrupt`` every shard is checked up front and the bad ones are
    skipped with a warning (``skipped_shards`` lists them).
    """

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
        if batch_size < 1 or world_size < 1 or not 0 <= rank < world_size or num_workers < 0:
            raise ValueError(
                f"bad stream settings: batch_size={batch_size}, rank={rank}, world_size={world_size}, "
                f"num_workers={num_workers}"
            )
        self.batch_size, self.seed, self.rank, self.world_size = batch_size, seed, rank, world_size
        self.num_workers = num_workers
        self.streams_per_rank = max(1, num_workers)
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
            sizes = self._declared_sizes(paths)
        self.shards = [p for p in paths if sizes.get(p, 0) > 0]
        self.sizes = [sizes[p] for p in self.shards]
        if not self.shards:
            raise ValueError(f"no readable samples in the shards of {shard_dir_or_pattern}")

    @staticmethod
    def _declared_sizes(paths: list[str]) -> dict[str, int]:
        """Counts from ``sizes.json``, else from the tar headers: no shard is decoded up front."""
        declared = declared_sizes(paths)
        return {p: declared[p] if p in declared else listed_samples(p) for p in paths}

    @property
    def num_samples(self) -> int:
        """Samples in one pass over all (readable) shards."""
        return sum(self.sizes)

    def samples_seen(self, steps: int) -> int:
        """Samples consumed by all ranks together after ``steps`` steps."""
        return steps * self.batch_size * self.world_size

    def _shard_at(self, position: int) -> int:
        epoch, index = divmod(position, len(self.shards))
        perm = np.random.default_rng([self.seed, epoch]).permutation(len(self.shards))
        return int(perm[index])

    def _samples(self, stream: int, skip: int) -> Iterator[dict[str, Any]]:
        """Endless samples of a logical stream, after skipping ``skip`` of them."""
        n_streams = self.world_size * self.streams_per_rank
        position = stream
        while True:
            index = self._shard_at(position)
            size = self.sizes[index]
            if skip >= size:
                skip -= size
            else:
                samples = load_shard(self.shards[index], size)
                order = np.random.default_rng([self.seed, 1_000_003, position]).permutation(size)
                for j in order[skip:]:
                    yield samples[j]
                skip = 0
            position += n_streams

    def _worker_batches(self, worker: int, start_step: int) -> Iterator[dict[str, list]]:
        """Batches of this rank's ``worker``-th stream for the steps ``t >= start_step`` it owns."""
        first = len(range(worker, start_step, self.streams_per_rank))
        stream = self.rank * self.streams_per_rank + worker
        samples = self._samples(stream, first * self.batch_size)
        while True:
            chunk = [next(samples) for _ in range(self.batch_size)]
            yield {
                "query": [s["query"] for s in chunk],
                "positive": [s["positive"] for s in chunk],
                "negatives": [list(s["negatives"]) for s in chunk],
            }

    def batches(self, start_step: int = 0) -> Iterator[dict[str, list]]:
        """Endless micro-batches of this rank from step ``start_step`` on."""
        if start_step < 0:
            raise ValueError(f"start_step must be >= 0, got {start_step}")
        if self.num_workers == 0:
            return self._worker_batches(0, start_step)
        loader = torch.utils.data.DataLoader(
            _WorkerView(self, start_step), batch_size=None, num_workers=self.num_workers, collate_fn=_identity
        )
        return iter(loader)


class _WorkerView(torch.utils.data.IterableDataset):
    """DataLoader worker ``i`` serves logical stream ``(start_step + i) mod W``, so the loader's
    round-robin order (worker 0 first) lines up with step ``start_step``."""

    def __init__(self, stream: TextShardStream, start_step: int) -> None:
        self.stream = stream
        self.start_step = start_step

    def __iter__(self) -> Iterator[dict[str, list]]:
        info = torch.utils.data.get_worker_info()
        worker_id = info.id if info is not None else 0
        logical = (self.start_step + worker_id) % self.stream.streams_per_rank
        return self.stream._worker_batches(logical, self.start_step)
