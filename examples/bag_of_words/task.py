"""The ``RunTask`` (clipmag/train/run.py): the data, validation, the export and the test phase.

The pairs are (first line of a function's docstring, the function's module, name and parameters)
for the public functions of ``data.modules``; every fifth pair is a validation pair and the next
one a test pair, the rest train. Words are hashed into ``model.buckets`` ids, so no vocabulary or
tokenizer is needed.
"""

from __future__ import annotations

import importlib
import inspect
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from clipmag.runtime.distributed import DistributedContext
from clipmag.scoring.head_record import HeadRecord
from clipmag.scoring.heads import build_head
from clipmag.scoring.losses import loss_from_config
from clipmag.train.batching import SeededBatches

from .config import BagConfig
from .model import BagOfWords

WEIGHTS = "model.safetensors"
SIDES = ("query", "document")
Split = dict[str, torch.Tensor]  # word ids of each side, one row a pair


def function_pairs(modules: list[str]) -> list[tuple[str, str]]:
    """(docstring's first line, "module name parameters") of every public function of ``modules``."""
    pairs = []
    for module_name in modules:
        for name, function in sorted(vars(importlib.import_module(module_name)).items()):
            if name.startswith("_") or not inspect.isfunction(function) or not (function.__doc__ or "").strip():
                continue
            try:
                parameters = " ".join(inspect.signature(function).parameters)
            except (TypeError, ValueError):  # a signature inspect cannot read
                parameters = ""
            pairs.append((function.__doc__.strip().splitlines()[0], f"{module_name} {name} {parameters}"))
    return pairs


def word_ids(texts: list[str], buckets: int, max_words: int) -> torch.Tensor:
    """Each text's first ``max_words`` words (identifiers split at ``_``), hashed to 1..buckets-1; 0 pads."""
    ids = torch.zeros(len(texts), max_words, dtype=torch.long)
    for row, text in enumerate(texts):
        words = re.findall(r"[a-z]+", text.lower())[:max_words]
        for column, word in enumerate(words):
            ids[row, column] = 1 + zlib.crc32(word.encode()) % (buckets - 1)
    return ids


class BagTask:
    front_end = "bag-of-words"
    primary_metric = "MRR"  # the validation metric that picks the best checkpoint

    def __init__(self, cfg: BagConfig, ctx: DistributedContext) -> None:
        self.cfg, self.ctx = cfg, ctx
        pairs = function_pairs(cfg.data.modules)
        parts: dict[str, list[tuple[str, str]]] = {"validation": pairs[0::5], "test": pairs[1::5]}
        parts["train"] = [pair for i, pair in enumerate(pairs) if i % 5 > 1]
        self.splits: dict[str, Split] = {name: self._encode(rows) for name, rows in parts.items()}
        # each micro-batch drawn for the global batch, this rank's slice of it: exact resume, and the
        # same batches on any number of ranks; too few pairs for one global batch is refused here
        self.batches = SeededBatches(
            len(parts["train"]), cfg.data.batch_size, cfg.train.seed, ctx.rank, ctx.world_size, "data.modules' pairs"
        )

    def _encode(self, pairs: list[tuple[str, str]]) -> Split:
        m = self.cfg.model
        return {side: word_ids([pair[i] for pair in pairs], m.buckets, m.max_words) for i, side in enumerate(SIDES)}

    # ---- the loop's Task -----------------------------------------------------------------------
    def build_model(self) -> BagOfWords:
        with torch.random.fork_rng():  # the same starting weights on every rank, whatever ran before
            torch.manual_seed(self.cfg.train.seed)
            return BagOfWords(self.cfg.model, build_head(self.cfg.head), loss_from_config(self.cfg.loss))

    def run_identity(self) -> dict[str, Any]:
        return {"model": "bag-of-words", "modules": list(self.cfg.data.modules)}

    def local_batch_size(self) -> int:
        return self.cfg.data.batch_size

    def train_batches(self, start_step: int) -> Iterator[Split]:
        train = self.splits["train"]
        for rows in self.batches.stream(start_step):
            yield {side: ids[torch.from_numpy(rows)] for side, ids in train.items()}

    def evaluate(self, model: BagOfWords) -> dict[str, float]:
        return ranking_metrics(model, self.splits["validation"])

    def export(self, model: BagOfWords, directory: Path) -> None:
        """The weights as safetensors (read back without unpickling) and the head record beside them."""
        directory.mkdir(parents=True, exist_ok=True)
        save_file({k: v.contiguous() for k, v in model.state_dict().items()}, directory / WEIGHTS)
        model.head_record().write(directory)

    # ---- the run driver's test phase -----------------------------------------------------------
    def load_export(self, directory: Path) -> BagOfWords:
        model = BagOfWords(self.cfg.model, build_head(HeadRecord.read(directory)), loss_from_config(self.cfg.loss))
        model.load_state_dict(load_file(directory / WEIGHTS))
        return model

    def exported_part(self, model: BagOfWords) -> BagOfWords:
        return model  # the export holds the whole model

    def test(self, model: BagOfWords) -> dict[str, dict[str, Any]]:
        return {"stdlib-functions": ranking_metrics(model, self.splits["test"])}

    def format_results(self, metrics: dict[str, dict[str, Any]]) -> str:
        return "\n".join(f"{name}: MRR {m['MRR']:.4f}, recall@1 {m['recall@1']:.4f}" for name, m in metrics.items())

    def describe_export(self, export: Path, record: HeadRecord, results: dict[str, Any]) -> None:
        """Nothing to add: the export is its weights and its head record."""


def ranking_metrics(model: BagOfWords, split: Split) -> dict[str, float]:
    """MRR and recall@1 of each query's own document among all of the split's, under the model's head."""
    device = next(model.parameters()).device
    queries, documents = (
        model.query_words(split["query"].to(device)),
        model.document_words(split["document"].to(device)),
    )
    scores = model.head.score(queries, documents)
    ranks = 1 + (scores > scores.diagonal().unsqueeze(1)).sum(dim=1)
    return {"MRR": float((1.0 / ranks).mean()), "recall@1": float((ranks == 1).float().mean())}
