"""Seeded, per-rank batches over data held in memory, for both front ends.

Every epoch is one permutation of all samples drawn from ``numpy.random.default_rng([seed, epoch])``;
it is cut into global batches of ``batch_size * world_size`` and rank ``r`` takes the ``r``-th slice
of each. Two properties follow, and the training loop relies on both:

- the batch of any step is a pure function of (seed, step, sizes), so a run resumed at step ``k``
  sees exactly what the uninterrupted run saw from step ``k`` on;
- N ranks with batch ``b`` together see exactly the batches of one rank with batch ``N * b``, so
  a multi-process run can be checked against a single-process one.

The remainder of each epoch (fewer samples than a global batch) is dropped: every rank needs a full
batch every step, because the embeddings are gathered across ranks.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np


def rank_slice(rank: int, batch_size: int) -> slice:
    """The part of a global batch that belongs to ``rank`` when every rank takes ``batch_size``."""
    return slice(rank * batch_size, (rank + 1) * batch_size)


class SeededBatches:
    """Sample indices of each step's batch for one rank; ``what`` names the data in errors."""

    def __init__(
        self,
        num_samples: int,
        batch_size: int,
        seed: int,
        rank: int = 0,
        world_size: int = 1,
        what: str = "training set",
    ) -> None:
        if batch_size < 1 or world_size < 1 or not 0 <= rank < world_size:
            raise ValueError(
                f"{what}: need batch_size >= 1 and 0 <= rank < world_size, got "
                f"batch_size={batch_size}, rank={rank}, world_size={world_size}"
            )
        self.num_samples, self.batch_size, self.seed = num_samples, batch_size, seed
        self.rank, self.world_size = rank, world_size
        self.global_batch = batch_size * world_size
        self.per_epoch = num_samples // self.global_batch
        if self.per_epoch == 0:
            raise ValueError(
                f"{what}: {num_samples} samples are fewer than one global batch of {self.global_batch} "
                f"({batch_size} per rank x {world_size} ranks); use more data or a smaller batch"
            )

    def _order(self, epoch: int) -> np.ndarray:
        return np.random.default_rng([self.seed, epoch]).permutation(self.num_samples)

    def _take(self, order: np.ndarray, within: int) -> np.ndarray:
        return order[within * self.global_batch :][rank_slice(self.rank, self.batch_size)]

    def indices(self, step: int) -> np.ndarray:
        """Indices of this rank's batch at ``step`` (0-based, counted across epochs)."""
        if step < 0:
            raise ValueError(f"step must be >= 0, got {step}")
        epoch, within = divmod(step, self.per_epoch)
        return self._take(self._order(epoch), within)

    def stream(self, start_step: int = 0) -> Iterator[np.ndarray]:
        """Endless ``indices(step)`` for ``step = start_step, start_step + 1, ...``; each epoch's
        permutation is drawn once, not once per step."""
        if start_step < 0:
            raise ValueError(f"start_step must be >= 0, got {start_step}")
        epoch, within = divmod(start_step, self.per_epoch)
        while True:
            order = self._order(epoch)
            for j in range(within, self.per_epoch):
                yield self._take(order, j)
            epoch, within = epoch + 1, 0
