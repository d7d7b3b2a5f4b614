"""Evaluation pipelines: retrieval (BEIR, BRIGHT) and STS, each scored with the encoder's own head.

``evaluate_retrieval`` and ``evaluate_sts`` are what a trainer calls for validation; they return
flat metric keys (``NDCG@10`` ..., ``Recall@1`` for BRIGHT, ``spearman`` ...) plus the magnitude
diagnostics of docs/method.md section 3. ``evaluate_paths`` is the command-line pipeline: load,
evaluate, write one JSON per model x dataset and a TREC run per retrieval set, each named by the
model's and the dataset's labels (distinct even where two inputs share a folder name).

Cohen's d of document norms is :func:`clipmag.scoring.diagnostics.document_norm_effect` (its definition,
sizes and seed are written into every result).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from scipy import stats

from clipmag.results.record import encoding_numerics
from clipmag.scoring.diagnostics import document_norm_effect, norm_stats, row_norms
from clipmag.storage.naming import distinct_labels, model_label
from text_retrieval.data.loaders import BrightDataset, EvalSettings, RetrievalDataset, STSPairs, load_eval_datasets
from text_retrieval.evaluation.bright_scores import add_recall_at_1, bright_summary
from text_retrieval.evaluation.metrics import check_trec_ids, evaluate_run, write_trec_run
from text_retrieval.evaluation.records import build_record, format_table, result_stem, write_record
from text_retrieval.model.encoder import TextEncoder
from text_retrieval.retrieval.corpus_cache import corpus_norms, encode_corpus
from text_retrieval.retrieval.encoding import empty_inputs, evaluation_encoding, with_export_lengths
from text_retrieval.retrieval.index import RetrievalSettings
from text_retrieval.retrieval.search import retrieve
from text_retrieval.serving.served import open_for_dataset

logger = logging.getLogger("clipmag")

__all__ = ["evaluate_retrieval", "evaluate_sts", "evaluate_paths"]


def _head_diagnostics(encoder: TextEncoder) -> dict[str, Any]:
    gq, gd = encoder.head.gammas()
    return {"head": encoder.head.name, "gamma_q": gq, "gamma_d": gd, "symmetric": encoder.head.symmetric}


def evaluate_retrieval(
    encoder: TextEncoder,
    dataset: RetrievalDataset,
    top_k: int = 1000,
    batch_size: int = 64,
    cache_dir: str | Path | None = None,
    run_file: str | Path | None = None,
    run_tag: str = "clipmag",
    nonrelevant_sample: int = 1000,
    seed: int = 0,
    show_progress: bool = True,
    keep_norms: bool = False,
    settings: EvalSettings | None = None,
    retrieval: RetrievalSettings | None = None,
    index: str | Path | None = None,
    index_store: str = "auto",
) -> dict[str, Any]:
    """Encode, search with ``encoder.head``, and score; flat metric keys plus diagnostics.

    Returns ``{"NDCG@10", "Recall@100", "MRR@10", "MAP@100", "num_queries", "num_documents",
    "per_query", "diagnostics", "encoding", "timings"}``, for BRIGHT also ``"Recall@1"`` (what the
    official long-document setting headlines) and ``"data"`` (setting, revision, missing gold ids),
    and ``"run_file"`` when one was written. ``settings`` (by default those a BRIGHT settings file
    attached to the dataset, if any) set the prefixes and max lengths for this dataset only.
    ``cache_dir=None`` (the default, right for validation during training) re-encodes the corpus.
    ``index``: a served index of this corpus (``text_retrieval/serving``), searched through its
    ``index_store`` instead of encoding the corpus; it must hold this model under this head.
    """
    bright = dataset if isinstance(dataset, BrightDataset) else None
    settings = settings or (bright.settings if bright else None)
    if run_file is not None:  # before encoding anything, not after the search
        check_trec_ids(dataset.query_ids, "query", dataset.name)
        check_trec_ids(dataset.corpus_ids, "document", dataset.name)
    timings: dict[str, float] = {}
    with evaluation_encoding(encoder, settings, bright.task if bright else dataset.name) as encoding:
        encoding.update(empty_inputs(dataset))
        served = open_for_dataset(index, encoder, dataset, index_store) if index else None
        start = time.perf_counter()
        docs = (
            None
            if served
            else encode_corpus(
                encoder,
                dataset.corpus_texts,
                cache_dir=cache_dir,
                dataset_name=dataset.name,
                dataset_fingerprint=dataset.fingerprint,
                batch_size=batch_size,
                show_progress=show_progress,
                settings=retrieval,
            )
        )
        if retrieval and retrieval.encodes_only:
            return {}  # this rank only helped encode the corpus; rank 0 evaluates
        timings["encode_corpus_s"] = time.perf_counter() - start
        start = time.perf_counter()
        qids = dataset.query_ids
        queries = encoder.encode([dataset.queries[q] for q in qids], "query", batch_size, show_progress)
        timings["encode_queries_s"] = time.perf_counter() - start
    start = time.perf_counter()
    run, searched = retrieve(docs, queries, dataset, encoder.head, top_k, retrieval, encoder.device, served)
    timings["search_s"] = time.perf_counter() - start
    start = time.perf_counter()
    mean, per_query = evaluate_run(dataset.qrels, run)
    if bright:
        add_recall_at_1(dataset.qrels, run, mean, per_query)
    timings["metrics_s"] = time.perf_counter() - start

    doc_norms = served.document_norms() if served else corpus_norms(docs)
    diagnostics = {
        **_head_diagnostics(encoder),
        "query_norm": norm_stats(row_norms(queries)),
        "document_norm": norm_stats(doc_norms),
        "document_norm_effect": document_norm_effect(
            doc_norms, dataset.corpus_ids, dataset.relevant_ids(), nonrelevant_sample, seed, keep_norms
        ),
    }
    result: dict[str, Any] = {
        **mean,
        "num_queries": len(per_query),
        "num_documents": len(dataset.corpus_ids),
        "top_k": top_k,
        "per_query": per_query,
        "diagnostics": diagnostics,
        "encoding": encoding,
        "search": searched,
        "timings": timings,
        "exclusions": {"ignore_identical_ids": dataset.ignore_identical_ids, "excluded_queries": len(dataset.excluded)},
    }
    if bright:
        result["data"] = bright.describe()
    if run_file is not None:
        result["run_file"] = str(write_trec_run(run, run_file, tag=run_tag))
    return result


def _correlations(predicted: np.ndarray, gold: np.ndarray) -> tuple[float, float]:
    return float(stats.spearmanr(predicted, gold).statistic), float(stats.pearsonr(predicted, gold).statistic)


def evaluate_sts(
    encoder: TextEncoder,
    pairs: STSPairs,
    batch_size: int = 64,
    side: str = "query",
    show_progress: bool = True,
    settings: EvalSettings | None = None,
) -> dict[str, Any]:
    """Spearman and Pearson of ``head.paired(a, b)`` and of ``head.paired(b, a)`` against gold.

    Both sentences are encoded identically (the ``side`` prefix and max length, query by default
    as E5-style models expect for symmetric tasks), so any difference between the two orders comes
    from the head alone. ``asymmetry_gap`` is the mean over pairs of |s(a,b) - s(b,a)|.
    ``settings`` set the evaluation-time prefixes and max lengths.
    """
    start = time.perf_counter()
    unique = list(dict.fromkeys(pairs.a + pairs.b))
    position = {text: i for i, text in enumerate(unique)}
    with evaluation_encoding(encoder, settings, pairs.name) as encoding:
        vectors = torch.from_numpy(encoder.encode(unique, side, batch_size, show_progress))  # type: ignore[arg-type]
    a = vectors[[position[t] for t in pairs.a]]
    b = vectors[[position[t] for t in pairs.b]]
    encode_s = time.perf_counter() - start
    with torch.no_grad():
        forward = encoder.head.paired(a, b).double().numpy()
        backward = encoder.head.paired(b, a).double().numpy()
    spearman, pearson = _correlations(forward, pairs.scores)
    spearman_r, pearson_r = _correlations(backward, pairs.scores)
    gap = np.abs(forward - backward)
    norms = row_norms(vectors)
    return {
        "spearman": spearman,
        "pearson": pearson,
        "spearman_reversed": spearman_r,
        "pearson_reversed": pearson_r,
        "asymmetry_gap": float(gap.mean()),
        "asymmetry_gap_max": float(gap.max()),
        "spearman_gap": abs(spearman - spearman_r),
        "num_pairs": len(pairs),
        "diagnostics": {
            **_head_diagnostics(encoder),
            "sentence_norm": norm_stats(norms),
            "gold_range": [float(pairs.scores.min()), float(pairs.scores.max())],
        },
        "encoding": encoding,
        "timings": {"encode_s": encode_s, "total_s": time.perf_counter() - start},
    }


def evaluate_paths(
    models: Sequence[str],
    data: Sequence[str | Path],
    output: str | Path,
    norm: str | None = None,
    pooling: str | None = None,
    split: str = "test",
    top_k: int = 1000,
    batch_size: int = 64,
    cache_dir: str | Path | None = None,
    show_progress: bool = True,
    settings: EvalSettings | None = None,
    retrieval: RetrievalSettings | None = None,
    precision: str = "auto",
    index: str | Path | None = None,
    index_store: str = "auto",
) -> list[dict[str, Any]]:
    """Evaluate every model on every dataset found under ``data``; write one JSON per pair.

    ``settings`` (default ``EvalSettings()``) choose the BRIGHT setting, the strictness and the
    evaluation-time prefixes and max lengths; the max lengths they leave unset are, for a clipmag
    export, its recorded inference lengths (its run's test lengths). The datasets of a settings
    file use that file's settings alone, as a run's test does. ``precision`` is what encoding
    computes in (``clipmag.runtime.precision``); each record's ``numerics`` says what it resolved to.
    ``index``: search every retrieval set through this served index (its corpus must be theirs).
    """
    output = Path(output)
    settings = settings or EvalSettings()
    datasets = [ds for path in data for ds in load_eval_datasets(path, split=split, settings=settings)]
    if (settings.long_documents or settings.reasoning) and not any(isinstance(ds, BrightDataset) for ds in datasets):
        raise ValueError("long documents and reasoning queries are BRIGHT settings, but no BRIGHT data was given")
    model_labels = distinct_labels([model_label(m) for m in models], models)
    data_labels = distinct_labels([ds.name for ds in datasets], [ds.source or ds.name for ds in datasets])
    records = []
    for model_path, model_name in zip(models, model_labels):
        encoder = TextEncoder.from_pretrained(model_path, norm=norm, pooling=pooling, precision=precision)
        if torch.cuda.is_available():
            encoder.to("cuda")
        model_settings = with_export_lengths(settings, encoder)
        for ds, data_name in zip(datasets, data_labels):
            start = time.perf_counter()
            own = ds.settings if isinstance(ds, BrightDataset) and ds.settings else model_settings
            if isinstance(ds, STSPairs):
                result = evaluate_sts(encoder, ds, batch_size=batch_size, show_progress=show_progress, settings=own)
            else:
                stem = result_stem(model_name, data_name, encoder.head.name)
                result = evaluate_retrieval(
                    encoder,
                    ds,
                    top_k=top_k,
                    batch_size=batch_size,
                    cache_dir=cache_dir,
                    run_file=output / "runs" / f"{stem}.trec",
                    run_tag=stem,
                    show_progress=show_progress,
                    settings=own,
                    retrieval=retrieval,
                    index=index,
                    index_store=index_store,
                )
            if retrieval and retrieval.encodes_only:
                continue
            result["timings"]["total_s"] = time.perf_counter() - start
            config = {
                "split": split,
                "top_k": top_k,
                "batch_size": batch_size,
                "cache_dir": cache_dir and str(cache_dir),
                "precision": precision,
            }
            config.update(result["encoding"])  # what was used, over the model's own settings
            if "data" in result:
                config["bright"] = result["data"]
            record = build_record(encoder, ds, result, config, (model_name, data_name))
            record["numerics"] = encoding_numerics(encoder.precision, encoder.device)
            if "Recall@1" in result:
                record["metrics"]["Recall@1"] = result["Recall@1"]
            record["output_file"] = str(write_record(record, output))
            records.append(record)
            logger.info("%s on %s: %s", model_path, data_name, {k: round(v, 4) for k, v in record["metrics"].items()})
    if not records:  # a rank that only helped encode
        return records
    print(format_table(records))
    if any("bright" in rec["config"] for rec in records):
        print(bright_summary(records))
    return records
