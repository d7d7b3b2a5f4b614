"""Training batches of image-caption shards, addressable by step so that a run resumes by counts.

The stream is a pure function of (shards, seed, batch size, world size, workers): the batch of any
step can be produced without producing the ones before it. A resumed run therefore skips whole
shards by their ``sizes.json`` counts and, inside the shard it resumes in, skips raw samples without
decoding them - instead of decoding and augmenting every batch it already trained on - and it sees
exactly the batches the uninterrupted run saw, augmentation included. The order is the text
stream's (``text_retrieval.data.shards``), here over images:

* epoch ``e`` reads every shard once, in a permutation seeded with ``(seed, e)``; shard position
  ``p`` of that endless sequence belongs to logical stream ``p mod S``, ``S = world_size * W``,
  ``W = max(1, workers)``; rank ``r`` takes step ``t`` from its stream ``r * W + t mod W`` (the
  order in which a DataLoader collects batches from its workers);
* the samples of the shard at position ``p`` are read in a permutation seeded with ``(seed, p)``,
  and the same seed picks each image's caption for this epoch (one of its captions, uniformly)
  and seeds its augmentation. Random crops therefore do not depend on the global RNG, on the
  worker that draws them, or on what ran before.

A whole shard's raw bytes are held in memory while it is read (COCO: about 160 MB for 1,000
images), so write shards in a shuffled order: the in-shard permutation is the only shuffle.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

from clipmag.shards import ShardError, read_samples

from .data import decode_sample, shard_sizes, validate_shards

SAMPLE_SALT = 7_919  # separates the in-shard draws from the shard permutation's seed


def _identity(batch: Any) -> Any:
    return batch


@contextlib.contextmanager
def _seeded(seed: int) -> Iterator[None]:
    """Run with torch's CPU generator and Python's ``random`` (timm's augmentations draw from it)
    seeded with ``seed``; both are left as they were."""
    python_state = random.getstate()
    with torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(seed)  # the CPU generator only: torch.manual_seed is slow
        random.seed(seed)
        try:
            yield
        finally:
            random.setstate(python_state)


class ClipShardStream:
    """Endless micro-batches ``(images, tokens)`` of one rank; ``batches(k)`` starts at step ``k``."""

    def __init__(
        self,
        spec: str,
        preprocess: Callable,
        tokenizer: Callable,
        batch_size: int,
        seed: int,
        rank: int = 0,
        world_size: int = 1,
        workers: int = 0,
    ) -> None:
        if batch_size < 1 or world_size < 1 or not 0 <= rank < world_size or workers < 0:
            raise ValueError(
                f"bad stream settings: batch_size={batch_size}, rank={rank}, world_size={world_size}, workers={workers}"
            )
        self.shards = validate_shards(spec)
        self.sizes = shard_sizes(self.shards)
        empty = [p for p, n in zip(self.shards, self.sizes) if n < 1]
        if empty:
            raise ShardError(f"data.train_shards: sizes.json declares no samples for {empty[0]}, which holds some")
        self.preprocess, self.tokenizer = preprocess, tokenizer
        self.batch_size, self.seed, self.rank, self.world_size = batch_size, seed, rank, world_size
        self.workers, self.streams_per_rank = workers, max(1, workers)

    @property
    def num_samples(self) -> int:
        """Images in one epoch."""
        return sum(self.sizes)

    def shard_at(self, position: int) -> int:
        """Index of the shard at ``position`` of the endless sequence of seeded epoch permutations."""
        epoch, index = divmod(position, len(self.shards))
        return int(np.random.default_rng([self.seed, epoch]).permutation(len(self.shards))[index])

    def _prepared(self, raw: dict[str, Any], pick: float, augment_seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        sample = decode_sample(raw)
        caption = sample.captions[int(pick * len(sample.captions))]
        with _seeded(augment_seed):
            image = self.preprocess(sample.image)
        return image, self.tokenizer(caption)[0]

    def _samples(self, stream: int, skip: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Endless prepared samples of a logical stream, after skipping ``skip`` of them undecoded."""
        position = stream
        while True:
            index = self.shard_at(position)
            size = self.sizes[index]
            if skip >= size:
                skip -= size
            else:
                raw = list(read_samples(self.shards[index], size))
                rng = np.random.default_rng([self.seed, SAMPLE_SALT, position])
                order, picks, seeds = rng.permutation(size), rng.random(size), rng.integers(2**62, size=size)
                for j in order[skip:]:
                    yield self._prepared(raw[j], picks[j], int(seeds[j]))
                skip = 0
            position += self.world_size * self.streams_per_rank

    def _worker_batches(self, worker: int, start_step: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Batches of this rank's ``worker``-th stream for the steps ``t >= start_step`` it owns."""
        owned_before = len(range(worker, start_step, self.streams_per_rank))
        samples = self._samples(self.rank * self.streams_per_rank + worker, owned_before * self.batch_size)
        while True:
            images, tokens = zip(*(next(samples) for _ in range(self.batch_size)))
            yield torch.stack(images), torch.stack(tokens)

    def batches(self, start_step: int = 0) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Endless micro-batches of this rank from step ``start_step`` on."""
        if start_step < 0:
            raise ValueError(f"start_step must be >= 0, got {start_step}")
        if self.workers == 0:
            return self._worker_batches(0, start_step)
        loader = torch.utils.data.DataLoader(
            _WorkerView(self, start_step), batch_size=None, num_workers=self.workers, collate_fn=_identity
        )
        return iter(loader)


class _WorkerView(torch.utils.data.IterableDataset):
    """DataLoader worker ``i`` serves logical stream ``(start_step + i) mod W``, so the loader's
    round-robin order (worker 0 first) lines up with step ``start_step``."""

    def __init__(self, stream: ClipShardStream, start_step: int) -> None:
        self.stream, self.start_step = stream, start_step

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        info = torch.utils.data.get_worker_info()
        worker = (self.start_step + (info.id if info is not None else 0)) % self.stream.streams_per_rank
        return self.stream._worker_batches(worker, self.start_step)
