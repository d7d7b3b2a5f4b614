"""The image-text training task for the generic engine: the open_clip model with its head, the
batches (bundled digits or WebDataset shards), head-aware evaluation, export and test.

Validation (``evaluate``, which picks the best checkpoint) runs on the validation sets and the final
numbers (``test``) on the test sets: the bundled set has one of each, shards name them in the lists
``data.validation`` and ``data.test`` (as the text trainer does: the first validation set picks the
checkpoint, every set is scored apart). Each scores every caption of every image
(``image_text.evaluation``) and is filed under the data's name: ``digits`` for the bundled set, the
shard folder's otherwise (``data/coco/test`` -> ``coco``), so two sets of one name are refused.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from clipmag.errors import ConfigError
from clipmag.runtime.distributed import DistributedContext
from clipmag.scoring.head_record import HeadRecord
from clipmag.scoring.heads import build_head
from clipmag.scoring.losses import loss_from_config
from clipmag.storage.user_files import non_blank_lines
from clipmag.train.batching import SeededBatches

from .config import ClipConfig
from .data import bundled as bundled_set
from .data.config import split_overlap
from .data.prompts import zero_shot_prompts
from .data.reading import EvalSet, check_eval_set, dataset_name, flatten_captions, read_eval_set, shard_paths
from .data.stream import ClipShardStream
from .evaluation.retrieval import encode, format_results, retrieval_metrics, retrieval_outcomes
from .evaluation.zero_shot import zero_shot_metrics, zero_shot_outcomes, zero_shot_predictions
from .model.architecture import build_open_clip, resolve_model_name
from .model.clip_model import ClipMagModel
from .model.export import export_open_clip
from .model.loading import load_clipmag

logger = logging.getLogger("clipmag")
BUNDLED_NAME = "digits"
CAPTION_SALT = 104_729  # separates the bundled caption draw from the batch order's seed


@dataclass
class ZeroShot:
    """Labelled images and the prompts that turn their classes into a zero-shot task."""

    images: torch.Tensor
    labels: torch.Tensor
    classnames: Sequence[str]
    templates: Sequence[str]


class ClipTask:
    """The engine's task: builds the open_clip model with its head, serves batches, evaluates."""

    primary_metric = "mean_r1_head"
    front_end = "clip"

    def __init__(self, cfg: ClipConfig, ctx: DistributedContext) -> None:
        self.cfg, self.ctx = cfg, ctx
        self.model_name = resolve_model_name(cfg.model.name)
        with torch.random.fork_rng():  # the same initial weights on every rank and for every batch size
            torch.manual_seed(cfg.train.seed)
            built = build_open_clip(cfg.model)
            self.clip, self.preprocess_train, self.preprocess_val, self.tokenizer = built
        if cfg.train.gradient_checkpointing:  # open_clip's own: both towers recompute their blocks
            self.clip.set_grad_checkpointing(True)
        self.eval_sets: dict[str, list[EvalSet]] = {"val": [], "test": []}
        self.eval_specs: dict[str, list[str]] = {"val": [], "test": []}
        self.classes: tuple[list[str], list[str]] | None = None
        self.bundled_zero_shot: ZeroShot | None = None  # the bundled set's own classification images
        if cfg.data.is_bundled:
            self._load_bundled()
        else:
            self._load_shards()

    # ---- data --------------------------------------------------------------------------------
    def _images(self, split: bundled_set.CompositeSplit) -> torch.Tensor:
        return torch.stack([self.preprocess_val(split.pil(i)) for i in range(len(split))])

    def _bundled_eval(self, split: bundled_set.CompositeSplit) -> EvalSet:
        texts, owner = flatten_captions(split.captions)
        tokens = split.caption_tokens(self.tokenizer).flatten(0, 1)
        return EvalSet(BUNDLED_NAME, self._images(split), texts, tokens, owner, torch.as_tensor(split.labels))

    def _load_bundled(self) -> None:
        d = self.cfg.data
        sets = bundled_set.build_sized(d.bundled, d.bundled.seed)
        # training images in half precision: half the memory; the model reads them in float32
        self.train_images = self._images(sets.train).half()
        self.train_tokens = sets.train.caption_tokens(self.tokenizer)
        self.eval_sets = {"val": [self._bundled_eval(sets.val)], "test": [self._bundled_eval(sets.test)]}
        cls_split = sets.classification
        self.bundled_zero_shot = ZeroShot(
            self._images(cls_split),
            torch.as_tensor(cls_split.labels),
            bundled_set.CLASSNAMES,
            bundled_set.TEMPLATES,
        )
        logger.info(
            "bundled digits: %d train, %d validation, %d test images (%d captions each), %d zero-shot images",
            len(sets.train),
            len(sets.val),
            len(sets.test),
            len(bundled_set.CAPTION_TEMPLATES),
            len(cls_split),
        )

    def _load_shards(self) -> None:
        d = self.cfg.data
        self.eval_specs = {"val": list(d.validation), "test": list(d.test)}
        specs = {"train": [d.train], "validation": d.validation, "test": d.test}
        overlap = split_overlap(
            {
                key: [p for spec in given for p in shard_paths(spec, f"data.{key}")]
                for key, given in specs.items()
                if given
            }
        )
        if overlap:
            raise ConfigError(overlap)
        self.stream = ClipShardStream(
            d.train,
            self.preprocess_train if d.augment else self.preprocess_val,
            self.tokenizer,
            d.batch_size,
            self.cfg.train.seed,
            skip_broken=d.skip_corrupt,
            rank=self.ctx.rank,
            world_size=self.ctx.world_size,
            workers=d.workers,
        )
        self._read_eval_sets()
        if d.classnames and d.templates:
            self.classes = (
                non_blank_lines(d.classnames, "data.classnames"),
                non_blank_lines(d.templates, "data.templates"),
            )

    def _read_eval_sets(self) -> None:
        """The validation and test sets, read in full before the first step: the tests are scored
        after the last, and a broken image or caption must not cost a whole training. Rank 0, which
        evaluates, keeps them; the other ranks decode every sample too, so every rank stops on a fault.
        Each set is filed under its folder's name, so two of one name in a list are refused."""
        for split, specs in self.eval_specs.items():
            key = f"data.{'validation' if split == 'val' else split}"
            names: dict[str, str] = {}
            for i, spec in enumerate(specs):
                where = f"{key}[{i}]" if len(specs) > 1 else key
                if self.ctx.is_main:
                    self.eval_sets[split].append(read_eval_set(spec, self.preprocess_val, self.tokenizer, where))
                else:
                    check_eval_set(spec, where)
                name = dataset_name(spec)  # after the read, which names a missing or broken set clearly
                if name in names:
                    raise ConfigError(
                        f"{key}: {names[name]} and {spec} are both named {name!r} (their folder's name), and each set "
                        "is scored under its name: keep one, or give one a folder of another name"
                    )
                names[name] = spec

    def _zero_shot(self, data: EvalSet) -> ZeroShot | None:
        """The zero-shot task scored beside a test set: the bundled set's own classification images,
        or the set's images where the classes are given and every image has one."""
        if self.bundled_zero_shot is not None:
            return self.bundled_zero_shot
        if self.classes is not None and bool((data.labels >= 0).all()):
            return ZeroShot(data.images, data.labels, *self.classes)
        return None

    def train_batches(self, start_step: int) -> Iterator[Any]:
        if not self.cfg.data.is_bundled:
            return self.stream.batches(start_step)
        return self._bundled_batches(start_step)

    def _bundled_batches(self, start_step: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Seeded batches of images, each with one of its captions, drawn anew every epoch."""
        order = SeededBatches(
            len(self.train_images),
            self.cfg.data.batch_size,
            self.cfg.train.seed,
            self.ctx.rank,
            self.ctx.world_size,
            what="bundled training set (data.bundled.train)",
        )
        n_images, n_captions = self.train_tokens.shape[:2]
        epoch, picks = -1, torch.empty(0, dtype=torch.long)
        for step, rows in enumerate(order.stream(start_step), start_step):
            if step // order.per_epoch != epoch:
                epoch = step // order.per_epoch
                rng = np.random.default_rng([self.cfg.train.seed, CAPTION_SALT, epoch])
                picks = torch.from_numpy(rng.integers(n_captions, size=n_images))
            rows = torch.from_numpy(rows)
            yield self.train_images[rows], self.train_tokens[rows, picks[rows]]

    def local_batch_size(self) -> int:
        return self.cfg.data.batch_size

    # ---- model -------------------------------------------------------------------------------
    def build_model(self) -> ClipMagModel:
        loss = loss_from_config(self.cfg.loss)
        head, query_side = build_head(self.cfg.head), self.cfg.model.query_side
        return ClipMagModel(self.clip, head, loss, query_side, self.model_name, self.cfg.train.cpu_math_attention)

    def _encode(self, fn: Callable[[torch.Tensor], torch.Tensor], inputs: torch.Tensor) -> torch.Tensor:
        """Raw features in the run's precision (``train.precision``)."""
        return encode(fn, inputs, self.cfg.data.eval_batch_size, self.ctx.device, self.cfg.train.precision)

    def _features(self, model: ClipMagModel, data: EvalSet) -> tuple[torch.Tensor, torch.Tensor]:
        """Raw image and text features of an evaluation set."""
        image_features = self._encode(lambda x: model.encode_image(x.float()), data.images)
        return image_features, self._encode(model.encode_text, data.tokens)

    def evaluate(self, model: ClipMagModel) -> dict[str, float]:
        """Validation: retrieval on each validation set (empty without one), and zero-shot on its own
        images where the classes are given and every image has one, so a choice may read zero-shot
        without a test number. The first set's metrics unprefixed (they pick the best checkpoint),
        every set's under its name, as in the text trainer."""
        flat: dict[str, float] = {}
        for i, data in enumerate(self.eval_sets["val"]):
            metrics = retrieval_metrics(model, *self._features(model, data), data.image_of_text)
            if self.classes is not None and bool((data.labels >= 0).all()):
                predictions = self._zero_shot_predictions(model, ZeroShot(data.images, data.labels, *self.classes))
                metrics.update(zero_shot_metrics(predictions, data.labels))
            if i == 0:
                flat.update(metrics)
            flat.update({f"{data.name}/{k}": v for k, v in metrics.items()})
        return flat

    def _zero_shot_predictions(self, model: ClipMagModel, zero_shot: ZeroShot) -> dict[str, torch.Tensor]:
        """Each zero-shot image's class, with cosine and with the head."""
        prompts = zero_shot_prompts(zero_shot.classnames, zero_shot.templates)
        prompt_features = self._encode(model.encode_text, self.tokenizer(prompts))
        images = self._encode(lambda x: model.encode_image(x.float()), zero_shot.images)
        return zero_shot_predictions(model, images, prompt_features, len(zero_shot.classnames))

    def export(self, model: ClipMagModel, directory: Path) -> None:
        export_open_clip(model, directory)
        logger.info("exported open_clip weights and head to %s", directory)

    # ---- test phase (the core run driver) ----------------------------------------------------
    def load_export(self, directory: Path) -> ClipMagModel:
        return load_clipmag(directory, self.ctx.device)[0]

    def exported_part(self, model: ClipMagModel) -> ClipMagModel:
        """The whole model: the export holds both towers and the head."""
        return model

    def test(self, model: ClipMagModel) -> dict[str, dict[str, Any]]:
        """Retrieval (and zero-shot, where classes are known) on each test set, under its name, with
        every query's outcome (``per_query``: the report's query-level tests)."""
        if not self.eval_sets["test"]:
            logger.warning("no test set (data.test): results.json gets no test numbers")
        return {data.name: self._tested(model, data) for data in self.eval_sets["test"]}

    def _tested(self, model: ClipMagModel, data: EvalSet) -> dict[str, Any]:
        features = self._features(model, data)
        metrics: dict[str, Any] = retrieval_metrics(model, *features, data.image_of_text)
        per_query = retrieval_outcomes(model, *features, data.image_of_text)
        zero_shot = self._zero_shot(data)
        if zero_shot is not None:
            predictions = self._zero_shot_predictions(model, zero_shot)
            metrics.update(zero_shot_metrics(predictions, zero_shot.labels))
            per_query.update(zero_shot_outcomes(predictions, zero_shot.labels))
        # each caption's image: the report tests the captions of one image as one cluster
        return {**metrics, "per_query": per_query, "image_of_text": data.image_of_text.tolist()}

    def run_identity(self) -> dict[str, Any]:
        m = self.cfg.model
        identity = {"objective": self.cfg.objective, "model": m.name, "query_side": m.query_side}
        locks = ("lock_image", "lock_image_unlocked_groups", "lock_text", "lock_text_unlocked_layers")
        identity.update({key: getattr(m, key) for key in (*locks, "lock_text_freeze_layer_norm")})  # what trains
        stream = getattr(self, "stream", None)
        if stream is not None and stream.skip_broken:
            identity["skipped_broken_images"] = stream.skipped
        return identity

    def describe_export(self, export: Path, record: HeadRecord, results: dict[str, Any]) -> None:
        """Nothing to add: ``export_open_clip`` wrote the model card with the head (how open_clip loads
        the towers and how the head scores them); the run's metrics are in its results.json."""

    def format_results(self, metrics: dict[str, dict[str, Any]]) -> str:
        """Each test set's summary under a title naming it, the objective, the head and the query side."""
        setting = f"{self.cfg.objective} objective, head {self.cfg.head.name}, query side {self.cfg.model.query_side}"
        if not metrics:
            return f"no test set: {setting}"
        return "\n".join(
            f"{name}: {setting}\n{format_results(found, self.cfg.head.name)}" for name, found in metrics.items()
        )
