"""A start's magnitude diagnostics before any fine-tuning, per test set, in one command: how much
relevance its document norms carry, how much its norms vary, and the Fisher predictor's verdict.

What a start's norms carry is read in three places otherwise: an untuned sweep cell's
``results.json`` (Cohen's d of document norms and both sides' norm statistics, per test set),
``clipmag-predict-norm`` (the Fisher condition, on training pairs) and the report's ``starts.json``
(Cohen's d and the document CV only). This command gives all of them for one start on each test
set, from one encoding of its queries and corpus:

* the norm mean, standard deviation and CV of every query of the split and every corpus document;
* Cohen's d of document norms, relevant against the seeded sample of never-relevant documents
  (:func:`clipmag.scoring.diagnostics.document_norm_effect`, its documented definition);
* the scale-free log-magnitude Fisher predictor (:func:`text_retrieval.predict.predictors.fisher_predictor`)
  on up to ``n_pairs`` judged (query, relevant document) pairs of the split, one per query (its
  first relevant document by id), drawn with ``seed``; its ``log_kappa_ratio`` = log(kappa_query /
  kappa_document) is the rule's margin (negative: dnorm).

A start is what the trainer builds from ``model.*``: a name or folder, ``model.init=random`` with
``model.init_seed`` (unset: ``seed``) for a random start, its pooling and max lengths. Test sets are
the trainer's ``data.test`` entries (BEIR folders, ``bundled:indomain``, ...).

Examples:
    clipmag-start-diagnostics --model splade-tiny --data bundled:indomain bundled:outdomain --output runs/starts/splade
    clipmag-start-diagnostics --model all-MiniLM-L6-v2 model.init=random model.init_seed=0 --start random \\
        --data data/beir/scifact --output runs/starts/random
    clipmag-start-diagnostics --model splade-tiny --data bundled:indomain bundled.test=1000 \\
        bundled.corpus_size=5000 bundled.root=runs/data/text-bundled-powered --output runs/starts/splade-1000

``--output`` is a folder that receives ``results.json``; as a sweep evaluation (kind
``start-diagnostics``) on an untuned cell, ``--model`` is the cell's export, which is the start.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from clipmag.config.checks import PositiveInt
from clipmag.config.command_line import parse_cli
from clipmag.config.entry import run_entry_point
from clipmag.registry.evaluations import EvaluationResult
from clipmag.results.record import RESULTS_FILE
from clipmag.runtime.precision_setting import PRECISIONS
from text_retrieval.config import BundledDataConfig, TextModelConfig

if TYPE_CHECKING:  # torch and transformers: only once a start is diagnosed, never for --help
    from text_retrieval.data.loaders import RetrievalDataset
    from text_retrieval.model.encoder import TextEncoder

__all__ = ["StartDiagnosticsConfig", "parse_args", "main", "entry", "read_evaluation", "judged_pairs", "set_metrics"]


@dataclass
class StartDiagnosticsConfig:
    """``start``: the label the record carries (unset: ``model.name``); ``data``: the test sets;
    ``split``: their qrels split; ``n_pairs``: judged pairs the Fisher predictor reads per set;
    ``nonrelevant_sample``: never-relevant documents Cohen's d compares with; ``output``: a folder.
    ``bundled``: the trainer's ``data.bundled`` (root, sizes, pinned versions), so ``bundled:indomain``
    is the same set the runs it is read beside were tested on (a sweep's 1,000-query trees).
    ``precision``: what the norms are encoded in, as for the trainer (a sweep passes a cell's pinned
    ``train.precision``, so a start pinned to fp32 is diagnosed in fp32 on every CPU)."""

    model: TextModelConfig = field(default_factory=TextModelConfig)
    start: str = ""
    data: list[str] = field(default_factory=lambda: ["bundled:indomain", "bundled:outdomain"])
    bundled: BundledDataConfig = field(default_factory=BundledDataConfig)
    split: str = "test"
    n_pairs: PositiveInt = 200
    nonrelevant_sample: PositiveInt = 1000
    fisher_batch_size: PositiveInt = 32
    batch_size: PositiveInt = 64
    seed: int = 0
    precision: Literal[PRECISIONS] = "auto"  # type: ignore[valid-type]
    output: str = ""


SHORTHANDS = {
    "model": "model.name",
    "data": "data",
    "start": "start",
    "split": "split",
    "n_pairs": "n_pairs",
    "seed": "seed",
    "precision": "precision",
    "output": "output",
}


def parse_args(argv: Sequence[str]) -> StartDiagnosticsConfig:
    """``[--config YAML] [--flag value ...] [key=value ...]`` -> checked settings."""
    cfg = parse_cli(StartDiagnosticsConfig, argv, SHORTHANDS, description=__doc__)
    if not cfg.output:
        raise ValueError("start diagnostics: --output FOLDER is required (it receives results.json)")
    return cfg


def judged_pairs(
    qrels: dict[str, dict[str, int]], query_ids: Sequence[str], n: int, seed: int
) -> list[tuple[str, str]]:
    """Up to ``n`` (query id, relevant document id) pairs, one per judged query (its first relevant
    document by id), in a seeded order."""
    pairs = []
    for qid in sorted(query_ids):
        relevant = sorted(d for d, gain in qrels.get(qid, {}).items() if gain > 0)
        if relevant:
            pairs.append((qid, relevant[0]))
    random.Random(f"{seed}:fisher-pairs").shuffle(pairs)
    return pairs[:n]


def _set_diagnostics(encoder: TextEncoder, dataset: RetrievalDataset, cfg: StartDiagnosticsConfig) -> dict[str, Any]:
    """Norm statistics, Cohen's d and the Fisher predictor of one retrieval set."""
    from clipmag.scoring.diagnostics import document_norm_effect, norm_stats, row_norms
    from text_retrieval.predict.predictors import fisher_predictor

    qids = list(dataset.query_ids)
    queries = encoder.encode([dataset.queries[q] for q in qids], "query", cfg.batch_size, show_progress=False)
    documents = encoder.encode(list(dataset.corpus_texts), "document", cfg.batch_size, show_progress=False)
    doc_norms = row_norms(documents)
    pairs = judged_pairs(dataset.qrels, qids, cfg.n_pairs, cfg.seed)
    q_row, d_row = {q: i for i, q in enumerate(qids)}, {d: i for i, d in enumerate(dataset.corpus_ids)}
    pairs = [(q, d) for q, d in pairs if d in d_row]
    fisher = fisher_predictor(
        (queries[[q_row[q] for q, _ in pairs]], documents[[d_row[d] for _, d in pairs]]),
        batch_size=cfg.fisher_batch_size,
        seed=cfg.seed,
    )
    kq, kd = fisher["kappa_query"], fisher["kappa_document"]
    fisher["log_kappa_ratio"] = math.log(kq / kd) if math.isfinite(kq) and math.isfinite(kd) else None
    fisher["pairs"] = len(pairs)
    return {
        "num_queries": len(qids),
        "num_documents": len(dataset.corpus_ids),
        "query_norm": norm_stats(row_norms(queries)),
        "document_norm": norm_stats(doc_norms),
        "document_norm_effect": document_norm_effect(
            doc_norms, dataset.corpus_ids, dataset.relevant_ids(), cfg.nonrelevant_sample, cfg.seed
        ),
        "fisher": fisher,
    }


def main(argv: Sequence[str]) -> dict[str, Any]:
    """Diagnose the start on every test set; ``--output FOLDER`` receives ``results.json``."""
    cfg = parse_args(argv)  # --help ends here, before torch loads
    import torch

    from clipmag.config.build import to_dict
    from clipmag.results.provenance import provenance
    from clipmag.runtime.distributed import DistributedContext
    from text_retrieval.config import TextConfig, TextDataConfig
    from text_retrieval.data.loaders import RetrievalDataset
    from text_retrieval.task import TextRetrievalTask

    text = TextConfig(
        model=cfg.model, data=TextDataConfig(test=list(cfg.data), test_split=cfg.split, bundled=cfg.bundled)
    )
    text = dataclasses.replace(text, train=dataclasses.replace(text.train, seed=cfg.seed, precision=cfg.precision))
    task = TextRetrievalTask(text, DistributedContext(0, 1, 0, torch.device("cpu"), None))  # reads every set first
    encoder = task.build_encoder()
    sets = {}
    for dataset in task.test_sets:
        if not isinstance(dataset, RetrievalDataset):
            raise ValueError(f"start diagnostics: {dataset.name} is not a retrieval set (STS has no relevance)")
        sets[dataset.name] = _set_diagnostics(encoder, dataset, cfg)
    record = {
        "start": cfg.start or cfg.model.name,
        "model": cfg.model.name,
        "init": cfg.model.init,
        "init_seed": task.random_init_seed(),
        "sets": sets,
        "settings": to_dict(cfg),
        "torch_threads": torch.get_num_threads(),
    }
    record["provenance"] = provenance(record["settings"])
    folder = Path(cfg.output)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / RESULTS_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    for name, s in sets.items():
        f, effect = s["fisher"], s["document_norm_effect"]
        print(
            f"{record['start']} on {name}: Cohen's d {effect.get('cohens_d')}, CV query {s['query_norm']['cv']:.4f} "
            f"/ document {s['document_norm']['cv']:.4f}, kappa query {f['kappa_query']:.4g} / document "
            f"{f['kappa_document']:.4g} -> {f['verdict']}"
        )
    return record


def set_metrics(entry: Mapping[str, Any]) -> dict[str, float]:
    """The flat numbers of one set's diagnostics (the plugin's ``START_METRICS``), those that are defined."""
    fisher = entry.get("fisher") or {}
    values = {
        "cohens_d": (entry.get("document_norm_effect") or {}).get("cohens_d"),
        "query_norm_cv": (entry.get("query_norm") or {}).get("cv"),
        "document_norm_cv": (entry.get("document_norm") or {}).get("cv"),
        **{k: fisher.get(k) for k in ("kappa_query", "kappa_document", "log_kappa_ratio")},
    }
    return {k: float(v) for k, v in values.items() if isinstance(v, (int, float))}


def read_evaluation(folder: str | Path) -> EvaluationResult:
    """The diagnostics per test set (no per-question outcomes)."""
    record = json.loads((Path(folder) / RESULTS_FILE).read_text(encoding="utf-8"))
    return EvaluationResult({name: set_metrics(entry) for name, entry in record["sets"].items()}, {})


def entry() -> None:
    """Console script ``clipmag-start-diagnostics``: user errors end with one ``error:`` line."""
    run_entry_point(main)
