"""The image-text training task for the generic engine: the open_clip model with its head, the
batches (embedded digits or WebDataset shards), head-aware evaluation, export and test.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Iterator, Sequence

import torch

from clipmag.batching import SeededBatches
from clipmag.distributed import DistributedContext
from clipmag.heads import head_from_config
from clipmag.losses import infonce_from_config

from . import embedded as embedded_set
from .config import ClipConfig
from .data import ShardError, ShardStream, read_eval_shards, validate_shards
from .evaluate import caption_relevance, encode, format_results, retrieval_metrics, zero_shot_metrics
from .model import ClipMagModel, build_open_clip, export_open_clip, load_clipmag, resolve_model_name

logger = logging.getLogger("clipmag")
TEST_SET = "test"


class ClipTask:
    """The engine's task: builds the open_clip model with its head, serves batches, evaluates."""

    primary_metric = "mean_r1_head"
    front_end = "clip"

    def __init__(self, cfg: ClipConfig, ctx: DistributedContext) -> None:
        self.cfg, self.ctx = cfg, ctx
        self.model_name = resolve_model_name(cfg.model.name)
        with torch.random.fork_rng():  # the same initial weights on every rank and for every batch size
            torch.manual_seed(cfg.train.seed)
            self.clip, self.preprocess_train, self.preprocess_val, self.tokenizer = build_open_clip(cfg.model)
        self.classes: tuple[Sequence[str], Sequence[str]] | None = None
        if cfg.data.source == "embedded":
            self._load_embedded()
        else:
            self._load_shards()

    # ---- data --------------------------------------------------------------------------------
    def _images(self, split: embedded_set.CompositeSplit) -> torch.Tensor:
        return torch.stack([self.preprocess_val(split.pil(i)) for i in range(len(split))]).half()

    def _load_embedded(self) -> None:
        d = self.cfg.data
        sets = embedded_set.build_embedded(d.embedded_train, d.embedded_test, d.embedded_per_class, seed=d.embedded_seed)
        self.train_tensors = (self._images(sets.train), self.tokenizer(sets.train.captions))
        self.test_images, self.test_captions = self._images(sets.test), sets.test.captions
        self.cls_images, self.cls_labels = self._images(sets.classification), torch.as_tensor(sets.classification.labels)
        self.classes = (embedded_set.CLASSNAMES, embedded_set.TEMPLATES)
        logger.info("embedded digits: %d train, %d test pairs, %d zero-shot images", len(sets.train), len(sets.test), len(sets.classification))

    def _load_shards(self) -> None:
        d = self.cfg.data
        self.stream = ShardStream(d.train_shards, self.preprocess_train if d.augment else self.preprocess_val, self.tokenizer,
                                  d.batch_size, self.cfg.train.seed, self.ctx.rank, d.workers, d.shuffle_buffer)
        self.test_images = None
        if d.val_shards:
            validate_shards(d.val_shards, what="data.val_shards")
        if d.classnames and d.templates:
            self.classes = (_lines(d.classnames), _lines(d.templates))

    def _load_val(self) -> None:
        if self.test_images is None and self.cfg.data.val_shards:
            images, self.test_captions, labels = read_eval_shards(self.cfg.data.val_shards, self.preprocess_val)
            self.test_images = images
            if self.classes and (labels >= 0).all():
                self.cls_images, self.cls_labels = images, labels

    def train_batches(self, start_step: int) -> Iterator[Any]:
        if self.cfg.data.source != "embedded":
            return self.stream.batches(start_step)
        order = SeededBatches(len(self.train_tensors[0]), self.cfg.data.batch_size, self.cfg.train.seed, self.ctx.rank,
                              self.ctx.world_size, what="embedded training set (data.embedded_train)")
        return (tuple(t[torch.from_numpy(rows)] for t in self.train_tensors) for rows in order.stream(start_step))

    def local_batch_size(self) -> int:
        return self.cfg.data.batch_size

    # ---- model -------------------------------------------------------------------------------
    def build_model(self) -> ClipMagModel:
        loss = infonce_from_config(self.cfg.loss, head_from_config(self.cfg.head))
        return ClipMagModel(self.clip, loss, self.cfg.model.query_side, self.model_name)

    def evaluate(self, model: ClipMagModel) -> dict[str, float]:
        self._load_val()
        if self.test_images is None:
            return {}
        device, bs = self.ctx.device, self.cfg.data.eval_batch_size
        image_features = encode(lambda x: model.encode_image(x.float()), self.test_images, bs, device)
        text_features = encode(model.encode_text, self.tokenizer(self.test_captions), bs, device)
        metrics = retrieval_metrics(model, image_features, text_features, caption_relevance(self.test_captions, self.test_captions))
        if self.classes is not None and getattr(self, "cls_images", None) is not None:
            cls_features = encode(lambda x: model.encode_image(x.float()), self.cls_images, bs, device)
            metrics.update(zero_shot_metrics(model, cls_features, self.cls_labels, *self.classes, self.tokenizer, device))
        metrics["test_pairs"] = float(len(self.test_captions))
        return metrics

    def export(self, model: ClipMagModel, directory: Path) -> None:
        export_open_clip(model, directory)
        logger.info("exported open_clip weights and head to %s", directory)

    # ---- test phase (the core run driver) ----------------------------------------------------
    def load_export(self, directory: Path) -> ClipMagModel:
        return load_clipmag(directory, self.ctx.device)[0]

    def test(self, model: ClipMagModel) -> dict[str, dict[str, Any]]:
        metrics = self.evaluate(model)
        return {TEST_SET: metrics} if metrics else {}

    def run_identity(self) -> dict[str, Any]:
        return {"objective": self.cfg.objective, "model": self.cfg.model.name, "query_side": self.cfg.model.query_side}

    def format_results(self, metrics: dict[str, dict[str, Any]]) -> str:
        found = metrics.get(TEST_SET, {})
        n = int(found.get("test_pairs", 0)) or None
        title = f"{self.cfg.objective} objective, head {self.cfg.head.name}, query side {self.cfg.model.query_side}"
        return title + "\n" + format_results(found, self.cfg.head.name, n)


def _lines(path: str) -> list[str]:
    p = Path(path)
    if not p.is_file():
        raise ShardError(f"file not found: {path}")
    return [line.strip() for line in p.read_text().splitlines() if line.strip()]
