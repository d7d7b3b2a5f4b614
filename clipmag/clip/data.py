"""Image-text batches: WebDataset shards the open_clip way, or tensors held in memory.

Shards follow open_clip's conventions: tar files whose samples hold an image (``jpg``/``png``/
``jpeg``/``webp``), a caption (``txt``) and optionally a class index (``cls``); the sample count
comes from ``sizes.json`` or ``__len__`` beside the shards (``open_clip_train.data.get_dataset_size``);
training reads *resampled* shards (``ResampledShards2``: shards drawn with replacement, so the
stream is endless and a run is measured in steps, not epochs). open_clip's helpers, transforms
and tokenizers are reused as they are; two things differ on purpose:

- Errors fail loudly. open_clip logs and skips unreadable samples (``log_and_continue``), which
  with resampling can spin forever on a folder of broken shards. Here every shard is checked
  before training starts and a read error during training raises ``ShardError`` naming the shard.
- Determinism per rank. The shard draw is seeded with ``(seed, rank, worker)`` and the batch
  stream can start at any micro-batch (fast-forward), so a resumed run sees the same data.

``TensorBatches`` serves data that fits in memory (the embedded set): a seeded permutation per
epoch, global batches cut into per-rank slices, so N ranks with batch b see exactly the batches of
one rank with batch N*b.
"""

from __future__ import annotations

import logging
import random
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Literal

import torch
import webdataset as wds
from open_clip_train.data import ResampledShards2, expand_urls, filter_no_caption_or_no_image, get_dataset_size
from torch.utils.data import get_worker_info

logger = logging.getLogger("clipmag")

IMAGE_EXTENSIONS = ("jpg", "png", "jpeg", "webp")


class ShardError(ValueError):
    """A shard that is missing, not a tar file, or holds no image-caption sample."""


@dataclass
class ClipDataConfig:
    """Where batches come from. ``source=auto``: shards when ``train_shards`` is set, else the
    embedded set (``embedded.py``), which needs nothing else.

    ``train_shards`` / ``val_shards``: brace patterns (``data/train-{000..009}.tar``), ``::`` joins
    several. ``batch_size`` is per rank and micro-batch. ``augment`` uses open_clip's training
    transform (random resized crop) for shards; the embedded set is always read un-augmented.
    ``classnames`` / ``templates``: text files (one per line, templates with ``{c}``) that turn the
    ``cls`` field of the validation shards into a zero-shot classification task.
    """

    source: Literal["auto", "embedded", "shards"] = "auto"
    batch_size: int = 128
    eval_batch_size: int = 256
    train_shards: str | None = None
    val_shards: str | None = None
    classnames: str | None = None
    templates: str | None = None
    workers: int = 0
    shuffle_buffer: int = 1000
    augment: bool = True
    embedded_train: int = 20000
    embedded_test: int = 1000
    embedded_per_class: int = 50
    embedded_seed: int = 0


def _is_remote(url: str) -> bool:
    return "://" in url or url.startswith("pipe:")


def validate_shards(pattern: str, what: str = "data.train_shards") -> list[str]:
    """Expand ``pattern`` and check that every local shard is a tar with an image-caption sample."""
    try:
        urls, _ = expand_urls(pattern)
    except Exception as err:  # braceexpand raises on malformed patterns
        raise ShardError(f"{what}: cannot expand {pattern!r}: {err}") from None
    if not urls:
        raise ShardError(f"{what}: {pattern!r} names no shards")
    for url in urls:
        if _is_remote(url):
            continue
        path = Path(url)
        if not path.is_file():
            raise ShardError(f"{what}: shard not found: {url}")
        try:
            with tarfile.open(path) as tar:
                suffixes: dict[str, set[str]] = {}
                for i, member in enumerate(tar):
                    key, _, ext = Path(member.name).name.partition(".")
                    suffixes.setdefault(str(Path(member.name).parent / key), set()).add(ext.lower())
                    if any("txt" in s and s & set(IMAGE_EXTENSIONS) for s in suffixes.values()):
                        break
                    if i >= 256:
                        raise ShardError(f"{what}: {url}: no image-caption sample among its first 256 files")
                else:
                    raise ShardError(
                        f"{what}: {url} holds no sample with an image ({'/'.join(IMAGE_EXTENSIONS)}) and a caption (txt)"
                    )
        except (tarfile.TarError, OSError, EOFError) as err:
            raise ShardError(f"{what}: {url} is not a readable tar file ({type(err).__name__}: {err})") from None
    return urls


def _dataset_size(pattern: str, urls: list[str]) -> tuple[int | None, int]:
    """open_clip's sample count (``sizes.json`` / ``__len__``); None when not recorded."""
    try:
        return get_dataset_size(pattern)
    except (KeyError, ValueError, OSError):
        return None, len(urls)


def _raise_shard_error(exn: Exception) -> bool:
    raise ShardError(f"reading WebDataset shards failed: {exn!r}") from exn


class _WorkerSeed:
    """Seed for the shard draw of one (run seed, rank, dataloader worker); picklable for workers."""

    def __init__(self, seed: int, rank: int) -> None:
        self.seed, self.rank = seed, rank

    def __call__(self) -> int:
        info = get_worker_info()
        return self.seed * 1_000_003 + self.rank * 1_009 + (info.id if info is not None else 0)


class _Tokenize:
    def __init__(self, tokenizer: Callable) -> None:
        self.tokenizer = tokenizer

    def __call__(self, text: str) -> torch.Tensor:
        return self.tokenizer(text)[0]


class ShardStream:
    """Endless, seeded, resampled micro-batches ``(images, tokens)`` of one rank."""

    def __init__(self, pattern: str, preprocess: Callable, tokenizer: Callable, batch_size: int, seed: int,
                 rank: int = 0, workers: int = 0, shuffle_buffer: int = 1000) -> None:
        self.pattern, self.urls = pattern, validate_shards(pattern)
        self.num_samples, self.num_shards = _dataset_size(pattern, self.urls)
        self.preprocess, self.tokenizer = preprocess, tokenizer
        self.batch_size, self.seed, self.rank = batch_size, seed, rank
        self.workers, self.shuffle_buffer = workers, shuffle_buffer
        logger.info("train shards: %d (%s samples)", self.num_shards, self.num_samples or "unknown number of")

    def _pipeline(self) -> wds.DataPipeline:
        return wds.DataPipeline(
            ResampledShards2(self.pattern, deterministic=True, worker_seed=_WorkerSeed(self.seed, self.rank)),
            wds.tarfile_to_samples(handler=_raise_shard_error),
            wds.shuffle(self.shuffle_buffer, initial=min(self.shuffle_buffer, 100), rng=random.Random(self.seed * 7919 + self.rank)),
            wds.select(filter_no_caption_or_no_image),
            wds.decode("pilrgb", handler=_raise_shard_error),
            wds.rename(image=";".join(IMAGE_EXTENSIONS), text="txt"),
            wds.map_dict(image=self.preprocess, text=_Tokenize(self.tokenizer)),
            wds.to_tuple("image", "text"),
            wds.batched(self.batch_size, partial=False),
        )

    def batches(self, start_step: int = 0) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        loader = wds.WebLoader(self._pipeline(), batch_size=None, shuffle=False, num_workers=self.workers,
                               persistent_workers=False)
        stream = iter(loader)
        for _ in range(start_step):  # fast-forward: same data as the uninterrupted run
            next(stream)
        yield from stream


def read_eval_shards(pattern: str, preprocess: Callable) -> tuple[torch.Tensor, list[str], torch.Tensor]:
    """All samples of ``pattern`` in order: (images [N, 3, H, W], captions [N], labels [N], -1 if no cls)."""
    urls = validate_shards(pattern, what="data.val_shards")
    pipeline = wds.DataPipeline(
        wds.SimpleShardList(urls),
        wds.tarfile_to_samples(handler=_raise_shard_error),
        wds.select(filter_no_caption_or_no_image),
        wds.decode("pilrgb", handler=_raise_shard_error),
    )
    images, captions, labels = [], [], []
    for sample in pipeline:
        image = next(sample[k] for k in IMAGE_EXTENSIONS if k in sample)
        images.append(preprocess(image))
        captions.append(str(sample["txt"]).strip())
        labels.append(int(sample["cls"]) if "cls" in sample else -1)
    if not images:
        raise ShardError(f"data.val_shards: {pattern!r} yielded no samples")
    return torch.stack(images), captions, torch.tensor(labels, dtype=torch.long)


class TensorBatches:
    """Deterministic batches over in-memory tensors, sliced per rank from a global batch."""

    def __init__(self, tensors: tuple[torch.Tensor, ...], batch_size: int, seed: int, rank: int = 0, world_size: int = 1) -> None:
        n = tensors[0].shape[0]
        if any(t.shape[0] != n for t in tensors):
            raise ValueError("TensorBatches: all tensors need the same first dimension")
        self.global_batch = batch_size * world_size
        if self.global_batch > n:
            raise ValueError(f"global batch {self.global_batch} exceeds the {n} training samples")
        self.tensors, self.batch_size, self.seed, self.rank = tensors, batch_size, seed, rank
        self.per_epoch = n // self.global_batch

    def batch(self, step: int, perm_cache: dict[int, torch.Tensor] | None = None) -> tuple[torch.Tensor, ...]:
        epoch, j = divmod(step, self.per_epoch)
        cache = perm_cache if perm_cache is not None else {}
        if epoch not in cache:
            cache.clear()
            gen = torch.Generator().manual_seed(self.seed * 100_003 + epoch)
            cache[epoch] = torch.randperm(self.tensors[0].shape[0], generator=gen)
        start = j * self.global_batch + self.rank * self.batch_size
        idx = cache[epoch][start : start + self.batch_size]
        return tuple(t[idx] for t in self.tensors)

    def batches(self, start_step: int = 0) -> Iterator[tuple[torch.Tensor, ...]]:
        cache: dict[int, torch.Tensor] = {}
        step = start_step
        while True:
            yield self.batch(step, cache)
            step += 1


def describe(pattern: str) -> dict[str, Any]:
    """Shard count and sample count (if recorded) of ``pattern``."""
    urls, _ = expand_urls(pattern)
    samples, shards = _dataset_size(pattern, urls)
    return {"shards": shards, "samples": samples}
