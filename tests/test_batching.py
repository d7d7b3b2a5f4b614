"""The shared per-rank seeded batcher: rank split, exact resume, clear errors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from clipmag.train.batching import SeededBatches


def _take(batches: SeededBatches, start: int, n: int) -> list[np.ndarray]:
    return list(itertools.islice(batches.stream(start), n))


@pytest.mark.parametrize("world", [2, 3])
def test_ranks_concatenate_to_the_single_rank_batch(world):
    one = _take(SeededBatches(100, batch_size=4 * world, seed=3), 5, 30)  # crosses several epoch ends
    ranks = [_take(SeededBatches(100, 4, seed=3, rank=r, world_size=world), 5, 30) for r in range(world)]
    for step, batch in enumerate(one):
        assert np.array_equal(batch, np.concatenate([r[step] for r in ranks]))


def test_an_epoch_visits_each_sample_at_most_once():
    batches = SeededBatches(50, batch_size=8, seed=0)
    epoch = np.concatenate(_take(batches, 0, batches.per_epoch))
    assert len(epoch) == 48 and len(set(epoch.tolist())) == 48
    assert not np.array_equal(epoch, np.concatenate(_take(batches, batches.per_epoch, batches.per_epoch)))


def test_resume_at_step_k_equals_the_tail():
    batches = SeededBatches(37, batch_size=3, seed=1, rank=1, world_size=2)
    full = _take(batches, 0, 40)
    for k in (1, 6, 13, 25):
        assert all(np.array_equal(a, b) for a, b in zip(_take(batches, k, 40 - k), full[k:], strict=True))
        assert np.array_equal(batches.indices(k), full[k])


def test_order_is_the_numpy_permutation_of_seed_and_epoch():
    batches = SeededBatches(20, batch_size=5, seed=7, rank=1, world_size=2)
    order = np.random.default_rng([7, 1]).permutation(20)
    assert np.array_equal(batches.indices(2), order[5:10])  # epoch 1 (2 steps each): its first global batch, rank 1
    assert not np.array_equal(SeededBatches(20, 5, seed=8).indices(0), SeededBatches(20, 5, seed=7).indices(0))


def test_too_little_data_names_it():
    expected = r"sts-train: 10 samples are fewer than one global batch of 12 \(4 per rank x 3 ranks\)"
    with pytest.raises(ValueError, match=expected):
        SeededBatches(10, batch_size=4, seed=0, rank=0, world_size=3, what="sts-train")
    with pytest.raises(ValueError, match="0 <= rank < world_size"):
        SeededBatches(10, batch_size=2, seed=0, rank=2, world_size=2)
