"""The text dense-retrieval task for the generic training loop: data, model, validation, export, test.

``infonce`` reads (query, positive, hard negatives) from WebDataset shards, or from a file of pairs
(JSONL or TSV, :mod:`text_retrieval.data.loaders.pairs`) held in memory; ``sts`` reads
(text_a, text_b, gold) pairs mapped onto [0, 1] by their declared scale. The model and its two
objectives are :class:`text_retrieval.model.biencoder.BiEncoder`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from torch import nn

from clipmag.errors import ConfigError
from clipmag.runtime import distributed as dist_utils
from clipmag.scoring.head_record import HeadRecord
from clipmag.scoring.heads import build_head
from clipmag.scoring.losses import loss_from_config
from clipmag.train.batching import SeededBatches
from clipmag.train.dropout import check_dropout_off
from clipmag.train.dropout.hf_attention import use_fast_dropout
from clipmag.train.loop_config import uses_fast_dropout
from text_retrieval.config import TextConfig
from text_retrieval.data.bundled.build import build_bundled
from text_retrieval.data.loaders import STSPairs, load_eval_datasets, load_sts_file
from text_retrieval.data.loaders.beir import is_beir_folder
from text_retrieval.data.loaders.overlap import training_pairs_overlap, validation_test_overlap
from text_retrieval.data.loaders.pairs import Sample, names_pairs_file, read_pairs
from text_retrieval.data.loaders.sts import GoldScale
from text_retrieval.data.training.crops import cropped_batches
from text_retrieval.data.training.shards import TextShardStream
from text_retrieval.evaluation.evaluate import evaluate_retrieval, evaluate_sts
from text_retrieval.model.biencoder import BiEncoder, default_sts_scale
from text_retrieval.model.encoder import TextEncoder

TABLE_KEYS = ("NDCG@10", "MRR@10", "Recall@100", "spearman", "spearman_reversed", "asymmetry_gap")
BUNDLED_PREFIX = "bundled:"
PER_QUERY_METRIC = "NDCG@10"
ASSUMED_STS_SCALE = GoldScale(0.0, 1.0, "assumed for a file of no known scale; set data.sts_range=[lo,hi]")
BUNDLED_KEYS = {
    "train": "train_shards",
    "indomain": "indomain",
    "outdomain": "outdomain",
    "sts": "sts_test",
    "sts_train": "sts_train",
}


class TextRetrievalTask:
    """Builds the encoder, streams the training data, validates, exports and tests."""

    front_end = "text"

    def __init__(self, cfg: TextConfig, ctx: dist_utils.DistributedContext) -> None:
        self.cfg, self.ctx = cfg, ctx
        self.primary_metric = "spearman" if cfg.objective == "sts" else "NDCG@10"
        self._bundled: dict[str, Path] | None = None
        self._refuse_validation_on_test_data()
        self.test_sets = self._load_test_sets()  # first: a missing or broken test set is named at once
        self._refuse_test_content_as_validation()
        self._refuse_evaluation_on_training_pairs()
        self.validation_sets = [
            ds for spec in cfg.data.validation for ds in self._load(spec, cfg.data.validation_split)
        ]

    # ---- data --------------------------------------------------------------------------------
    def _refuse_validation_on_test_data(self) -> None:
        """Validation picks the exported checkpoint, so it must never read a test set: the same BEIR
        folder with the same split, or the same BRIGHT or STS data (whose loaders have no split)."""
        d = self.cfg.data
        tests = {self.resolve(spec).resolve(): spec for spec in d.test}
        for spec in d.validation:
            path = self.resolve(spec).resolve()
            if path in tests and (d.validation_split == d.test_split or not is_beir_folder(path)):
                raise ConfigError(
                    f"data.validation {spec!r} and data.test {tests[path]!r} are the same data ({path}, split "
                    f"{d.validation_split!r}); validation picks the checkpoint, so the test numbers would be tuned "
                    "on the test set: validate on another split (data.validation_split) or another set"
                )

    def _refuse_test_content_as_validation(self) -> None:
        """A test set's queries under another path (a copy) are refused as validation too (``overlap.py``)."""
        d = self.cfg.data
        validation, test = ({spec: self.resolve(spec) for spec in specs} for specs in (d.validation, d.test))
        problem = validation_test_overlap(validation, test, d.validation_split, d.test_split)
        if problem:
            raise ConfigError(problem)

    def _refuse_evaluation_on_training_pairs(self) -> None:
        """A pairs file trained on is refused as validation or test data (``overlap.py``)."""
        d = self.cfg.data
        train = Path(d.train)  # the bundled set's pairs are never an evaluation set's
        if self.cfg.objective != "retrieval" or not names_pairs_file(train):
            return
        evaluated = {key: {spec: self.resolve(spec) for spec in getattr(d, key)} for key in ("validation", "test")}
        problem = training_pairs_overlap(train, evaluated, {"validation": d.validation_split, "test": d.test_split})
        if problem:
            raise ConfigError(problem)

    def _load_test_sets(self) -> list[Any]:
        """The test sets, read in full before the first step: they are scored after the last, and a
        missing file, a malformed line or a byte that is not UTF-8 must not cost a whole training.
        Every rank reads them, so every rank stops on a fault; rank 0, which tests, keeps them."""
        sets = []
        for spec in self.cfg.data.test:
            try:
                sets += self._load(spec, self.cfg.data.test_split)
            except FileNotFoundError as err:
                raise FileNotFoundError(f"data.test {spec!r}: {err} (relative to {Path.cwd()})") from None
        return sets if self.ctx.is_main else []

    def bundled_paths(self) -> dict[str, Path]:
        """Build the bundled default once (rank 0 first, the others wait and reuse it)."""
        if self._bundled is None:
            e = self.cfg.data.bundled
            sizes = dict(n_train=e.train, n_test=e.test, n_dev=e.validation, corpus_size=e.corpus_size, seed=0)
            kwargs = dict(**sizes, python=e.python, scikit_learn=e.scikit_learn)
            if self.ctx.is_main:
                self._bundled = build_bundled(e.root, **kwargs)
            dist_utils.barrier()
            if not self.ctx.is_main:
                self._bundled = build_bundled(e.root, **kwargs)
        return self._bundled

    def resolve(self, spec: str) -> Path:
        """A dataset path, or ``bundled:<name>`` for a part of the bundled default."""
        if spec == "bundled":
            spec = BUNDLED_PREFIX + ("sts_train" if self.cfg.objective == "sts" else "train")
        if not spec.startswith(BUNDLED_PREFIX):
            return Path(spec)
        name = spec[len(BUNDLED_PREFIX) :]
        if name not in BUNDLED_KEYS:
            raise ValueError(
                f"unknown bundled dataset {spec!r}; valid: {', '.join(BUNDLED_PREFIX + k for k in BUNDLED_KEYS)}"
            )
        return self.bundled_paths()[BUNDLED_KEYS[name]]

    def _load(self, spec: str, split: str) -> list[Any]:
        path = self.resolve(spec)
        if spec.startswith(BUNDLED_PREFIX) and path.is_file():
            return [load_sts_file(path, name=spec[len(BUNDLED_PREFIX) :])]
        return load_eval_datasets(path, split=split)

    def sts_train_pairs(self, path: Path) -> STSPairs:
        """The STS training file on its declared scale (``data.sts_range``, else the format's, else [0, 1])."""
        declared = GoldScale(*self.cfg.data.sts_range, "data.sts_range") if self.cfg.data.sts_range else None
        return load_sts_file(path, gold_scale=declared, default_scale=ASSUMED_STS_SCALE)

    def local_batch_size(self) -> int:
        return self.cfg.data.batch_size

    def train_batches(self, start_step: int) -> Iterator[dict[str, Any]]:
        """This rank's slice of every global batch: the order is the seed's and the global batch's,
        whatever the number of ranks (shards: ``clipmag.storage.shard_stream``; STS pairs in memory:
        ``clipmag.train.batching``)."""
        d, rank, world = self.cfg.data, self.ctx.rank, self.ctx.world_size
        seed = self.cfg.train.seed
        train = self.resolve(d.train)
        if self.cfg.objective == "sts":
            return _pair_batches(self.sts_train_pairs(train), d.batch_size, seed, rank, world, start_step)
        if names_pairs_file(train):
            return _sample_batches(read_pairs(train), d.batch_size, seed, rank, world, start_step, str(train))
        stream = TextShardStream(train, d.batch_size, seed, rank, world, d.workers, d.skip_corrupt)
        _check_batch_fits(stream.num_samples, d.batch_size, world, train)
        if d.pairs == "crops":
            return cropped_batches(stream.batches(start_step), tuple(d.crop_ratio), seed, start_step)
        return stream.batches(start_step)

    # ---- model -------------------------------------------------------------------------------
    def random_init_seed(self) -> int | None:
        """The seed of a random start (``model.init_seed``, else ``train.seed``); None for pretrained weights."""
        m = self.cfg.model
        if m.init != "random":
            return None
        return self.cfg.train.seed if m.init_seed is None else m.init_seed

    def build_encoder(self) -> TextEncoder:
        m = self.cfg.model
        encoder = TextEncoder.from_pretrained(
            m.name,
            head=build_head(self.cfg.head),
            random_init_seed=self.random_init_seed(),
            pooling=m.pooling,
            query_prefix=m.query_prefix,
            document_prefix=m.document_prefix,
            query_max_length=m.query_max_length,
            document_max_length=m.document_max_length,
            dropout=m.dropout,
            precision=self.cfg.train.precision,  # validation encodes as the run trains
        )
        check_dropout_off(encoder.model, m.dropout, m.name)
        pooler = getattr(encoder.model, "pooler", None)
        if isinstance(pooler, nn.Module):
            # BERT's pooler never feeds our pooling; frozen, DDP does not wait for its gradients.
            pooler.requires_grad_(False)
        if self.cfg.train.gradient_checkpointing:
            # non-reentrant: recomputed inside autograd, so FSDP's gathers run again in the backward pass
            encoder.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        return encoder

    def build_model(self) -> BiEncoder:
        """The model to train: the encoder with the fast CPU dropout unless ``train.fast_dropout=false``
        (the encoders built for evaluation and export never drop, so they keep the model's own)."""
        encoder = self.build_encoder()
        if uses_fast_dropout(self.cfg.train):
            use_fast_dropout(encoder.model)
        sts_scale = self.cfg.data.sts_scale or default_sts_scale(encoder.head)
        loss = loss_from_config(self.cfg.loss)
        return BiEncoder(encoder, loss, self.cfg.objective, self.cfg.data.hard_negatives, sts_scale)

    # ---- evaluation and export ---------------------------------------------------------------
    def evaluate_sets(
        self, encoder: TextEncoder, datasets: list[Any], keep_norms: bool = False
    ) -> dict[str, dict[str, Any]]:
        """Full results per dataset name (retrieval: NDCG@10, MRR@10, ...; STS: spearman, ...)."""
        results = {}
        for ds in datasets:
            if isinstance(ds, STSPairs):
                results[ds.name] = evaluate_sts(
                    encoder, ds, batch_size=self.cfg.data.eval_batch_size, show_progress=False
                )
            else:
                results[ds.name] = evaluate_retrieval(
                    encoder,
                    ds,
                    top_k=100,
                    batch_size=self.cfg.data.eval_batch_size,
                    show_progress=False,
                    keep_norms=keep_norms,
                )
        return results

    def evaluate(self, model: nn.Module) -> dict[str, float]:
        """Validation: the first set's metrics unprefixed (for the best checkpoint), all prefixed."""
        flat: dict[str, float] = {}
        for i, (name, result) in enumerate(self.evaluate_sets(model.encoder, self.validation_sets).items()):
            scalars = {
                k: float(v) for k, v in result.items() if isinstance(v, (int, float)) and not isinstance(v, bool)
            }
            if i == 0:
                flat.update(scalars)
            flat.update({f"{name}/{k}": v for k, v in scalars.items()})
        return flat

    def test(self, encoder: TextEncoder) -> dict[str, dict[str, Any]]:
        """Results on the configured test sets. Of the per-query scores only nDCG@10 is kept (a few
        KB per set), which the report's paired tests over queries read."""
        results = self.evaluate_sets(encoder, self.test_sets, keep_norms=True)
        for result in results.values():
            if "per_query" in result:
                result["per_query"] = {
                    qid: {PER_QUERY_METRIC: row[PER_QUERY_METRIC]} for qid, row in result["per_query"].items()
                }
        return results

    def test_lengths(self) -> dict[str, int]:
        """The max lengths the final test encodes at (every test set without a settings file of its
        own): the training lengths, ``model.query_max_length`` / ``model.document_max_length``."""
        m = self.cfg.model
        return {"query_max_length": m.query_max_length, "document_max_length": m.document_max_length}

    def export(self, model: BiEncoder, directory: Path) -> None:
        """Save the model with its record, whose inference lengths are the test's: the test loads the
        export and encodes at them, and so do sentence-transformers, MTEB and ``eval_text.py``, so
        a user of the export scores what the run reported. The training lengths are recorded apart."""
        record = dataclasses.replace(model.head_record(), **self.test_lengths())
        model.encoder.save_pretrained(directory, record=record)

    def load_export(self, directory: Path) -> TextEncoder:
        """The export as a user loads it (the head and settings come from its ``clipmag_head.json``),
        encoding in the run's ``train.precision``: the test computes as the run trained and as its
        record's ``numerics`` say, not in what ``auto`` picks where the two differ (a run pinned to
        fp32 on a CPU with bf16 units)."""
        return TextEncoder.from_pretrained(directory, precision=self.cfg.train.precision)

    def exported_part(self, model: BiEncoder) -> TextEncoder:
        """The encoder (with its head), which the export holds and the test scores."""
        return model.encoder

    def run_identity(self) -> dict[str, Any]:
        """The objective, the model, how its weights began (``init``; a random start adds its seed) and
        where the pairs come from (``pairs``; crops add their ratio): a resume of another start or
        another kind of pair is refused, and a results reader sees a random start as one."""
        identity = {"objective": self.cfg.objective, "model": self.cfg.model.name, "init": self.cfg.model.init}
        if self.cfg.model.init == "random":
            identity["init_seed"] = self.random_init_seed()
        identity["pairs"] = self.cfg.data.pairs
        if self.cfg.data.pairs == "crops":
            identity["crop_ratio"] = list(self.cfg.data.crop_ratio)
        return identity

    def describe_export(self, export: Path, record: HeadRecord, results: dict[str, Any]) -> None:
        """The export's model card gets the training data and the test metrics (from memory: the
        run has just written them)."""
        from text_retrieval.model.card import write_model_card

        write_model_card(export, record, results, [self.cfg.data.train])

    def format_results(self, metrics: dict[str, dict[str, Any]]) -> str:
        """One row per test set, the metrics it has."""
        lines = [f"test results (head: {self.cfg.head.name})"]
        for name, result in metrics.items():
            cells = [f"{k} {result[k]:.4f}" for k in TABLE_KEYS if isinstance(result.get(k), float)]
            lines.append(f"  {name:<24} " + "  ".join(cells))
        return "\n".join(lines)


def _check_batch_fits(num_samples: int, batch_size: int, world: int, where: str) -> None:
    """A global batch larger than the training set repeats queries inside one batch: a query's own
    positive would then also be an in-batch negative of its copy, so the loss is refused instead."""
    if num_samples < batch_size * world:
        raise ValueError(
            f"{where}: {num_samples} training pairs are fewer than one global batch of {batch_size * world} "
            f"(data.batch_size={batch_size} x {world} ranks): batches would repeat queries; lower data.batch_size"
        )


def _sample_batches(
    samples: list[Sample], batch_size: int, seed: int, rank: int, world: int, start_step: int, where: str
) -> Iterator[dict[str, Any]]:
    """Endless seeded epochs over a pairs file's samples, global batches sliced by rank, in the
    layout the shard stream yields; exact on resume."""
    _check_batch_fits(len(samples), batch_size, world, where)
    batches = SeededBatches(len(samples), batch_size, seed, rank, world, what=where)
    return (
        {
            "query": [samples[i]["query"] for i in rows],
            "positive": [samples[i]["positive"] for i in rows],
            "negatives": [list(samples[i]["negatives"]) for i in rows],
        }
        for rows in batches.stream(start_step)
    )


def _pair_batches(
    pairs: STSPairs, batch_size: int, seed: int, rank: int, world: int, start_step: int
) -> Iterator[dict[str, Any]]:
    """Endless seeded epochs over scored pairs, global batches sliced by rank; exact on resume."""
    batches = SeededBatches(len(pairs), batch_size, seed, rank, world, what=pairs.name)
    targets = pairs.unit_scores()
    return (
        {
            "text_a": [pairs.a[i] for i in rows],
            "text_b": [pairs.b[i] for i in rows],
            "score": [float(targets[i]) for i in rows],
        }
        for rows in batches.stream(start_step)
    )
