"""Both shard readers split one epoch across 2 ranks x 2 DataLoader workers without loss or overlap.

``test_text_shards.py`` already shows, for the text reader with equal shards, that one epoch of steps
yields every sample once and that a resumed rank continues its batches. What is shown here: the
same for the image-text reader (``image_text.data.stream``), and for both readers a layout whose shards
do not split evenly over the four streams (the builders' last shard is short): every shard-epoch is
partitioned exactly - each stream's share of epoch 0 (the shards at its positions of the epoch's
permutation) holds every sample once across the streams - and a run restarted mid-epoch from its
step continues every rank's batches.

With uneven shards the streams do not finish an epoch at the same step (every rank yields a full
batch every step), so a step count is no epoch boundary there; within each shard-epoch the
partition is still exact.
"""

from __future__ import annotations

import io
import itertools
from collections import Counter
from pathlib import Path

import pytest
import torch
from PIL import Image

from clipmag.storage.shards import write_tar_shards
from image_text.data.stream import ClipShardStream
from text_retrieval.data.training.shards import TextShardStream, write_text_shards

WORLD, WORKERS = 2, 2


def _png() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (2, 2), (10, 20, 30)).save(buf, format="PNG")
    return buf.getvalue()


def _tokenize(texts: str | list[str]) -> torch.Tensor:
    """A caption ``image <i> ...`` becomes the token ``i``, so a batch names its images."""
    texts = [texts] if isinstance(texts, str) else texts
    return torch.tensor([[int(t.split()[1])] for t in texts])


def _preprocess(image: Image.Image) -> torch.Tensor:
    return torch.zeros(1)


def _write(kind: str, folder: Path, n: int, per_shard: int) -> Path:
    if kind == "text":
        samples = [{"query": f"q{i}", "positive": f"p{i}", "negatives": []} for i in range(n)]
        write_text_shards(samples, folder, samples_per_shard=per_shard)
    else:
        png = _png()
        records = ({"__key__": f"{i:05d}", "png": png, "txt": f"image {i} a\nimage {i} b"} for i in range(n))
        write_tar_shards(records, folder, per_shard)
    return folder


def _stream(kind: str, folder: Path, batch_size: int, rank: int):
    if kind == "text":
        return TextShardStream(folder, batch_size, seed=5, rank=rank, world_size=WORLD, num_workers=WORKERS)
    return ClipShardStream(
        str(folder), _preprocess, _tokenize, batch_size, 5, rank=rank, world_size=WORLD, workers=WORKERS
    )


def _ids(kind: str, batch) -> list[int]:
    if kind == "text":
        return [int(q[1:]) for q in batch["query"]]
    return batch[1][:, 0].tolist()


def _steps(kind: str, stream, start: int, n: int) -> list[list[int]]:
    return [_ids(kind, b) for b in itertools.islice(stream.batches(start), n)]


def test_clip_reader_one_epoch_of_steps_is_every_image_once(tmp_path):
    """48 images in 8 shards of 6, batch 3: each of the 4 streams holds 2 shards, 4 batches; 8 steps."""
    folder = _write("clip", tmp_path / "clip", 48, 6)
    seen = Counter()
    for rank in range(WORLD):
        seen.update(i for batch in _steps("clip", _stream("clip", folder, 3, rank), 0, 8) for i in batch)
    assert seen == Counter(range(48))


@pytest.mark.parametrize("kind", ["text", "clip"])
def test_uneven_shards_ranks_cut_one_global_batch_without_overlap(kind, tmp_path):
    """53 samples in shards of 5 (the last of 3): every step, the ranks' batches are disjoint slices
    of the batch one process of the global batch reads, so no sample is lost or read twice."""
    folder = _write(kind, tmp_path / kind, 53, 5)
    batch_size, steps = 4, 6
    per_rank = [_steps(kind, _stream(kind, folder, batch_size, rank), 0, steps) for rank in range(WORLD)]
    one = (
        TextShardStream(folder, batch_size * WORLD, seed=5, rank=0, world_size=1, num_workers=WORKERS)
        if kind == "text"
        else ClipShardStream(
            str(folder), _preprocess, _tokenize, batch_size * WORLD, 5, rank=0, world_size=1, workers=WORKERS
        )
    )
    for t, batch in enumerate(_steps(kind, one, 0, steps)):
        slices = [per_rank[rank][t] for rank in range(WORLD)]
        assert sum(slices, []) == batch
        assert not set(slices[0]) & set(slices[1])
