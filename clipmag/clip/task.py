"""The image-text training task for the generic engine, and the run entry point.

``ClipConfig`` is the whole run: the objective (``i2t``, ``t2i`` or ``sym``), the open_clip
architecture, the data, and the shared head / loss / optimizer / loop sections. Its defaults are
the embedded run (composite digits, ``clipmag-tiny``), sized to train in a few minutes on two CPU
cores, so ``python scripts/train_clip.py`` with no arguments is a complete experiment.

Objective -> roles (paper.md section 5): ``i2t`` makes the image the query and ranks texts
(InfoNCE ``q2d``); ``t2i`` makes the text the query; ``sym`` averages both softmax axes
(``both``) with ``model.query_side`` as the query. The loss direction and the query side are
derived from the objective when the config is resolved, and the resolved values are what is saved.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Literal, Sequence

import torch

from clipmag import distributed as dist_utils
from clipmag.config import ConfigError, parse_cli
from clipmag.distributed import DistributedContext
from clipmag.settings import HeadConfig, LossConfig, OptimConfig, TrainLoopConfig

from . import embedded as embedded_set
from .data import ClipDataConfig, ShardError, ShardStream, TensorBatches, read_eval_shards, validate_shards
from .evaluate import caption_relevance, encode, format_results, retrieval_metrics, zero_shot_metrics
from .model import ClipMagModel, ClipModelConfig, build_open_clip, export_open_clip, resolve_model_name

logger = logging.getLogger("clipmag")

Objective = Literal["sym", "i2t", "t2i"]
SHORTHANDS = {
    "norm": "head.name",
    "loss": "objective",
    "model": "model.name",
    "pretrained": "model.pretrained",
    "query_side": "model.query_side",
    "resume": "train.resume",
    "output": "train.output_dir",
    "steps": "train.steps",
    "seed": "train.seed",
    "batch_size": "data.batch_size",
    "train_shards": "data.train_shards",
    "val_shards": "data.val_shards",
}


@dataclass
class ClipConfig:
    """One image-text run. Defaults: the embedded digits set, symmetric loss, cosine head."""

    objective: Objective = "sym"
    model: ClipModelConfig = field(default_factory=ClipModelConfig)
    data: ClipDataConfig = field(default_factory=ClipDataConfig)
    head: HeadConfig = field(default_factory=HeadConfig)
    # open_clip's logit scale: learnable, initialised at 1/0.07, clamped at 100.
    loss: LossConfig = field(default_factory=lambda: LossConfig(direction="both", scale=1 / 0.07, learnable_scale=True, max_scale=100.0))
    optim: OptimConfig = field(default_factory=lambda: OptimConfig(lr=2e-3, weight_decay=0.1, eps=1e-6, warmup_steps=30, gamma_lr=1e-2))
    train: TrainLoopConfig = field(default_factory=lambda: TrainLoopConfig(output_dir="runs/clip", steps=400, log_every=50, save_every=200))


def resolve(cfg: ClipConfig) -> ClipConfig:
    """Derive loss direction, query side and data source; reject unusable settings early."""
    direction = "both" if cfg.objective == "sym" else "q2d"
    side = {"i2t": "image", "t2i": "text"}.get(cfg.objective, cfg.model.query_side)
    source = cfg.data.source if cfg.data.source != "auto" else ("shards" if cfg.data.train_shards else "embedded")
    cfg = dataclasses.replace(
        cfg, loss=dataclasses.replace(cfg.loss, direction=direction), model=dataclasses.replace(cfg.model, query_side=side),
        data=dataclasses.replace(cfg.data, source=source),
    )
    problems = []
    if cfg.data.batch_size < 2:
        problems.append(f"data.batch_size must be >= 2 for in-batch negatives, got {cfg.data.batch_size}")
    if cfg.train.steps < 1:
        problems.append(f"train.steps must be >= 1, got {cfg.train.steps}")
    if cfg.data.source == "shards" and not cfg.data.train_shards:
        problems.append("data.source=shards needs data.train_shards (e.g. data/train-{000..009}.tar)")
    if cfg.data.source == "embedded" and cfg.data.train_shards:
        problems.append("data.train_shards is set but data.source=embedded: drop one of them")
    try:
        resolve_model_name(cfg.model.name)
    except ValueError as err:
        problems.append(str(err))
    if problems:
        raise ConfigError("; ".join(problems))
    return cfg


def parse_args(argv: Sequence[str]) -> ClipConfig:
    return resolve(parse_cli(ClipConfig, argv, SHORTHANDS))


class ClipTask:
    """The engine's task: builds the open_clip model with its head, serves batches, evaluates."""

    primary_metric = "mean_r1_head"

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
        if self.cfg.data.source == "embedded":
            batches = TensorBatches(self.train_tensors, self.cfg.data.batch_size, self.cfg.train.seed, self.ctx.rank, self.ctx.world_size)
            return batches.batches(start_step)
        return self.stream.batches(start_step)

    def local_batch_size(self) -> int:
        return self.cfg.data.batch_size

    # ---- model -------------------------------------------------------------------------------
    def build_model(self) -> ClipMagModel:
        loss = self.cfg.loss.build(self.cfg.head.build())
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
        export_open_clip(model, directory, extra={"objective": self.cfg.objective})
        logger.info("exported open_clip weights and head to %s", directory)


def _lines(path: str) -> list[str]:
    p = Path(path)
    if not p.is_file():
        raise ShardError(f"file not found: {path}")
    return [line.strip() for line in p.read_text().splitlines() if line.strip()]


def run(cfg: ClipConfig) -> dict[str, float]:
    """Train (or resume) one run under torchrun or alone; print and save the head-aware results."""
    from clipmag.engine import train
    from clipmag.run_logging import setup_logging

    ctx = dist_utils.init_distributed(cfg.train.device)
    setup_logging(cfg.train.output_dir, ctx.rank)
    try:
        task = ClipTask(cfg, ctx)
        metrics = train(task, cfg.train, cfg.optim, cfg, ctx)
        if ctx.is_main and metrics:
            out = Path(cfg.train.output_dir)
            record = {"objective": cfg.objective, "head": cfg.head.name, "model": cfg.model.name, "metrics": metrics}
            (out / "results.json").write_text(json.dumps(record, indent=2, default=float))
            n = int(metrics.get("test_pairs", 0)) or None
            print(f"\n{cfg.objective} objective, head {cfg.head.name}, query side {cfg.model.query_side}")
            print(format_results(metrics, cfg.head.name, n))
        return metrics
    finally:
        dist_utils.cleanup()
