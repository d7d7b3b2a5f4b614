"""Endless training batches over WebDataset shards, addressable by step: the order is arithmetic.

webdataset's ``split_by_node`` / ``split_by_worker`` / ``ResampledShards`` keep their position in
iterator state, which a killed run cannot recover, so resuming would mean replaying (decoding,
augmenting) every batch already trained on. Here the batch of any step is a pure function of
(shards, seed, global batch, workers), so a resumed run skips whole shards by their counts and,
inside the shard it resumes in, skips samples without preparing them:

* the shard sequence is an endless concatenation of seeded permutations of all shards, one per
  epoch (seed ``(seed, epoch)``); position ``p`` of it goes to logical stream ``p mod W`` with
  ``W = max(1, workers)``, so within an epoch every shard goes to exactly one stream;
* a stream reads its shards in turn, each in a permutation seeded with ``(seed, salt, p)``
  (front ends draw their per-sample randomness from the same generator after it, indexed by the
  sample, so a sample is prepared alike whichever rank prepares it);
* step ``t`` takes the next global batch (``batch_size * world_size`` samples) of stream
  ``t mod W`` - the order in which a DataLoader collects batches from its workers - and rank ``r``
  keeps the ``r``-th slice of it, so ``t`` steps consume exactly ``t * batch_size * world_size``
  samples.

The number of ranks does not change the order: ``N`` ranks of batch ``b`` see, slice by slice, the
batches of one process of batch ``N * b``, so a run resumes on another number of ranks, and two
nodes train on what one process would (``clipmag.train.batching`` gives data held in memory the
same property). A rank prepares (decodes, augments) only its own slice; it reads every shard its
slice touches, which with shards larger than a global batch is every shard. The order depends on
``workers``: resume with the value the run started with. Both front ends subclass
``AddressableShardStream`` with how to read a shard, prepare a sample and collate a batch.
A ``ShardError`` met in a DataLoader worker reaches the main process as itself: one line naming the
shard, not the worker's traceback. Workers ignore Ctrl-C, which a terminal sends them too: the main
process decides when to stop (at a step boundary), and a worker that died of it would fail the step.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch

from clipmag.storage.shards import ShardError


def _identity(batch: Any) -> Any:
    return batch


def _ignore_interrupts(worker: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class AddressableShardStream:
    """This rank's micro-batches over ``shards`` (with their sample counts) from any step on."""

    salt: int = 0  # separates the in-shard draws from the epoch permutations' seeds

    def __init__(
        self,
        shards: Sequence[str],
        sizes: Sequence[int],
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
        self.shards, self.sizes = list(shards), list(sizes)
        self.batch_size, self.seed, self.rank, self.world_size = batch_size, seed, rank, world_size
        self.workers, self.streams = workers, max(1, workers)

    # ---- what a front end provides -----------------------------------------------------------------
    def read_shard(self, index: int) -> list[Any]:
        """The raw samples of shard ``index`` (a ``ShardError`` naming it when unreadable)."""
        raise NotImplementedError

    def preparer(self, rng: np.random.Generator, size: int) -> Callable[[list[Any], int], Any]:
        """How to turn raw sample ``j`` of a shard into a training sample; may draw from ``rng``, by
        ``j`` (every draw made up front for all ``size`` samples), never in the order samples come."""
        return lambda raw, j: raw[j]

    def collate(self, samples: list[Any]) -> Any:
        """One micro-batch from ``batch_size`` samples."""
        raise NotImplementedError

    # ---- the arithmetic --------------------------------------------------------------------------
    @property
    def num_samples(self) -> int:
        """Samples in one pass over all shards."""
        return sum(self.sizes)

    def samples_seen(self, steps: int) -> int:
        """Samples consumed by all ranks together after ``steps`` steps."""
        return steps * self.batch_size * self.world_size

    def shard_at(self, position: int) -> int:
        """Index of the shard at ``position`` of the endless sequence of seeded epoch permutations."""
        epoch, index = divmod(position, len(self.shards))
        return int(np.random.default_rng([self.seed, epoch]).permutation(len(self.shards))[index])

    def _rows(self, stream: int, first_batch: int) -> Iterator[Any]:
        """Endless prepared samples of this rank's slices of the global batches of a logical stream,
        from its global batch ``first_batch`` on. The other ranks' samples are skipped unprepared,
        and a shard holding none of this rank's samples is not read."""
        global_batch = self.batch_size * self.world_size
        low, high = self.rank * self.batch_size, (self.rank + 1) * self.batch_size
        wanted_from = first_batch * global_batch  # the stream's first sample still to come
        begin, position = 0, stream  # the stream index of the shard's first sample; its place in the sequence
        while True:
            index = self.shard_at(position)
            size = self.sizes[index]
            at = np.arange(max(begin, wanted_from), begin + size)
            mine = at[(at % global_batch >= low) & (at % global_batch < high)] - begin
            if mine.size:
                raw = self.read_shard(index)
                rng = np.random.default_rng([self.seed, self.salt, position])
                order = rng.permutation(size)
                prepare = self.preparer(rng, size)
                for j in order[mine]:
                    yield prepare(raw, int(j))
            begin += size
            position += self.streams

    def worker_batches(self, worker: int, start_step: int) -> Iterator[Any]:
        """Batches of this rank's ``worker``-th stream for the steps ``t >= start_step`` it owns."""
        owned_before = len(range(worker, start_step, self.streams))
        samples = self._rows(worker, owned_before)
        while True:
            yield self.collate([next(samples) for _ in range(self.batch_size)])

    def batches(self, start_step: int = 0) -> Iterator[Any]:
        """Endless micro-batches of this rank from step ``start_step`` on."""
        if start_step < 0:
            raise ValueError(f"start_step must be >= 0, got {start_step}")
        if self.workers == 0:
            return self.worker_batches(0, start_step)
        loader = torch.utils.data.DataLoader(
            _WorkerView(self, start_step),
            batch_size=None,
            num_workers=self.workers,
            collate_fn=_identity,
            worker_init_fn=_ignore_interrupts,
        )
        return _raising(loader)


class _WorkerFailure:
    """A broken shard met in a DataLoader worker, sent to the main process as a batch: torch would
    re-raise it there with the worker's whole traceback as its message, burying the shard's name."""

    def __init__(self, error: ShardError) -> None:
        self.error = error


def _raising(loader: torch.utils.data.DataLoader) -> Iterator[Any]:
    """The loader's batches, with a worker's ``ShardError`` raised as itself (one line naming the shard).

    The workers are let go before the error is raised: left to the garbage collector with the
    error's traceback, their shutdown waits out a timeout per worker.
    """
    batches, failure = iter(loader), None
    for batch in batches:
        if isinstance(batch, _WorkerFailure):
            failure = batch.error
            break
        yield batch
    del batches
    if failure is not None:
        raise failure


class _WorkerView(torch.utils.data.IterableDataset):
    """DataLoader worker ``i`` serves logical stream ``(start_step + i) mod W``, so the loader's
    round-robin order (worker 0 first) lines up with step ``start_step``."""

    def __init__(self, stream: AddressableShardStream, start_step: int) -> None:
        self.stream, self.start_step = stream, start_step

    def __iter__(self) -> Iterator[Any]:
        info = torch.utils.data.get_worker_info()
        worker = (self.start_step + (info.id if info is not None else 0)) % self.stream.streams
        try:
            yield from self.stream.worker_batches(worker, self.start_step)
        except ShardError as err:
            yield _WorkerFailure(err)
