"""Image-text batches: WebDataset shards the open_clip way, or tensors held in memory.

Shards follow open_clip's conventions: tar files whose samples hold an image (``jpg``/``png``/
``jpeg``/``webp``), a caption (``txt``) and optionally a class index (``cls``); the sample count
comes from ``sizes.json`` or ``__len__`` beside the shards (``open_clip_train.data.get_dataset_size``);
training reads *resampled* shards (``ResampledShards2``: shards drawn with replacement, so the
stream is endless and a run is measured in steps, not epochs). open_clip's helpers, transforms
and tokenizers are reused as they are; two things differ on purpose:

- Errors fail loudly. open_clip logs and skips unreadable samples (``log_and_continue``), which
  with resampling can spin forever on a folder of broken shards. Here every shard is checked
  before training starts, and shards are read through ``clipmag.shards.read_samples`` (the reader
  the text front end uses too): a read error, or a shard with fewer samples than ``sizes.json``
  declares, raises ``ShardError`` naming the shard.
- Determinism per rank. The shard draw is seeded with ``(seed, rank, worker)`` and the batch
  stream can start at any micro-batch (fast-forward), so a resumed run sees the same data.

Data that fits in memory (the embedded set) is batched by ``clipmag.batching.SeededBatches``.
"""

from __future__ import annotations

import itertools
import logging
import random
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch
import webdataset as wds
from open_clip_train.data import ResampledShards2, filter_no_caption_or_no_image, get_dataset_size
from torch.utils.data import get_worker_info

from clipmag.shards import ShardError, declared_sizes, expand_shards, read_samples

logger = logging.getLogger("clipmag")

IMAGE_EXTENSIONS = ("jpg", "png", "jpeg", "webp")
CHECKED_SAMPLES = 256  # how far into a shard validate_shards looks for an image-caption sample


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


def _has_image_and_caption(sample: dict[str, Any]) -> bool:
    return "txt" in sample and any(ext in sample for ext in IMAGE_EXTENSIONS)


def validate_shards(pattern: str, what: str = "data.train_shards") -> list[str]:
    """Expand ``pattern`` and check that every local shard is a tar with an image-caption sample,
    so that a bad path fails before the model is built rather than inside a DataLoader worker."""
    urls = expand_shards(pattern, what)
    for url in urls:
        if _is_remote(url):
            continue
        if not Path(url).is_file():
            raise ShardError(f"{what}: shard not found: {url}")
        try:
            found = any(_has_image_and_caption(s) for s in itertools.islice(read_samples(url), CHECKED_SAMPLES))
        except ShardError as err:
            raise ShardError(f"{what}: {err}") from None
        if not found:
            raise ShardError(f"{what}: {url} holds no sample with an image ({'/'.join(IMAGE_EXTENSIONS)}) and a "
                             f"caption (txt) among its first {CHECKED_SAMPLES} samples")
    return urls


def _dataset_size(pattern: str, urls: list[str]) -> int | None:
    """Recorded sample count: ``sizes.json`` beside the shards, else open_clip's other record (a
    ``__len__`` file); None when there is neither."""
    declared = declared_sizes(urls)
    if all(url in declared for url in urls):
        return sum(declared[url] for url in urls)
    try:
        return get_dataset_size(pattern)[0]
    except (KeyError, ValueError, OSError, SyntaxError):
        return None


class _ShardSamples:
    """Pipeline stage ``{"url": ...}`` -> samples through the shared reader, which names a broken
    shard and checks counts against ``sizes.json``; an object, so DataLoader workers can pickle it."""

    def __init__(self, urls: list[str]) -> None:
        self.sizes = declared_sizes([url for url in urls if not _is_remote(url)])

    def __call__(self, shards: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for shard in shards:
            yield from read_samples(shard["url"], self.sizes.get(shard["url"]))


def _raise_decode_error(exn: Exception) -> bool:
    """webdataset's decode handler: a sample that does not decode is an error naming its shard
    (webdataset's ``DecodingError`` carries the url and key), never a sample silently skipped."""
    cause = exn.__cause__ or exn
    where = f"corrupt shard {getattr(exn, 'url', None) or '(unknown)'}: sample {getattr(exn, 'key', None)!r}"
    raise ShardError(f"{where} does not decode ({type(cause).__name__}: {cause})") from exn


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
        self.num_samples, self.num_shards = _dataset_size(pattern, self.urls), len(self.urls)
        self.preprocess, self.tokenizer = preprocess, tokenizer
        self.batch_size, self.seed, self.rank = batch_size, seed, rank
        self.workers, self.shuffle_buffer = workers, shuffle_buffer
        logger.info("train shards: %d (%s samples)", self.num_shards, self.num_samples or "unknown number of")

    def _pipeline(self) -> wds.DataPipeline:
        return wds.DataPipeline(
            ResampledShards2(self.pattern, deterministic=True, worker_seed=_WorkerSeed(self.seed, self.rank)),
            _ShardSamples(self.urls),
            wds.shuffle(self.shuffle_buffer, initial=min(self.shuffle_buffer, 100),
                        rng=random.Random(self.seed * 7919 + self.rank)),
            wds.select(filter_no_caption_or_no_image),
            wds.decode("pilrgb", handler=_raise_decode_error),
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
        _ShardSamples(urls),
        wds.select(filter_no_caption_or_no_image),
        wds.decode("pilrgb", handler=_raise_decode_error),
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
