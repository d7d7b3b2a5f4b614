"""Training batches of image-caption shards, addressable by step so that a run resumes by counts.

The order is the core's addressable stream (``clipmag.storage.shard_stream``, the text trainer's too), here
over images, so a resumed run skips whole shards by their ``sizes.json`` counts and, inside the shard
it resumes in, skips raw samples without decoding them - instead of decoding and augmenting every
batch it already trained on - and it sees exactly the batches the uninterrupted run saw,
augmentation included: the generator that permutes a shard's samples also picks each image's
caption for the epoch (one of its captions, uniformly) and seeds its augmentation, so random crops
do not depend on the global RNG, on the worker that draws them, or on what ran before.

A whole shard's raw bytes are held in memory while it is read (COCO: about 160 MB for 1,000
images), so write shards in a shuffled order: the in-shard permutation is the only shuffle.

A training image that does not decode stops the run with one line naming shard, sample and fault,
unless ``skip_broken`` (``data.skip_corrupt``): then the sample's place in the batch goes to
the next sample of the same shard that decodes, so batches keep their size and a resumed run sees
the same batches; each skip is a warning, and the count (over every DataLoader worker) goes into
the run's results.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import random
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

from clipmag.runtime.logs import logger
from clipmag.storage.shard_stream import AddressableShardStream
from clipmag.storage.shards import ShardError, read_samples

from .reading import decode_sample, shard_sizes, validate_shards

SAMPLE_SALT = 7_919  # separates the in-shard draws from the shard permutation's seed


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


class ClipShardStream(AddressableShardStream):
    """Endless micro-batches ``(images, tokens)`` of one rank; ``batches(k)`` starts at step ``k``."""

    salt = SAMPLE_SALT

    def __init__(
        self,
        spec: str,
        preprocess: Callable,
        tokenizer: Callable,
        batch_size: int,
        seed: int,
        skip_broken: bool = False,
        **placement: int,
    ) -> None:
        """``placement``: ``rank``, ``world_size`` and ``workers`` (``AddressableShardStream``)."""
        shards = validate_shards(spec)
        sizes = shard_sizes(shards)
        empty = [p for p, n in zip(shards, sizes) if n < 1]
        if empty:
            raise ShardError(f"data.train: sizes.json declares no samples for {empty[0]}, which holds some")
        super().__init__(shards, sizes, batch_size, seed, **placement)
        self.preprocess, self.tokenizer = preprocess, tokenizer
        self.skip_broken = skip_broken
        self._skipped = multiprocessing.Value("q", 0)  # shared with forked DataLoader workers

    @property
    def skipped(self) -> int:
        """Broken training images replaced so far, by this process and its workers."""
        return int(self._skipped.value)

    def read_shard(self, index: int) -> list[dict[str, Any]]:
        return list(read_samples(self.shards[index], self.sizes[index]))

    def preparer(self, rng: np.random.Generator, size: int) -> Callable[[list[Any], int], Any]:
        """Each image's caption pick and augmentation seed come from the shard's own generator."""
        picks, seeds = rng.random(size), rng.integers(2**62, size=size)
        return lambda raw, j: self._prepared(raw, j, picks[j], int(seeds[j]))

    def _decoded(self, raw: list[dict[str, Any]], j: int) -> Any:
        """Sample ``j`` decoded; with ``skip_broken``, the first that decodes from ``j`` on (wrapping)."""
        for offset in range(len(raw)):
            try:
                return decode_sample(raw[(j + offset) % len(raw)])
            except ShardError as err:
                if not self.skip_broken:
                    raise ShardError(f"{err}; data.skip_corrupt=true trains on without it") from None
                with self._skipped.get_lock():
                    self._skipped.value += 1
                logger.warning("skipped a broken training image (data.skip_corrupt): %s", err)
        raise ShardError(f"shard {raw[j].get('__url__', '?')}: no sample of it decodes")

    def _prepared(
        self, raw: list[dict[str, Any]], j: int, pick: float, augment_seed: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        sample = self._decoded(raw, j)
        caption = sample.captions[int(pick * len(sample.captions))]
        with _seeded(augment_seed):
            image = self.preprocess(sample.image)
        return image, self.tokenizer(caption)[0]

    def collate(self, samples: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor]:
        images, tokens = zip(*samples)
        return torch.stack(images), torch.stack(tokens)
