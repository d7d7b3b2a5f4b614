"""The scorers: retrieval (BEIR, BRIGHT) and STS, each scored with the encoder's own head.

``evaluate_retrieval`` and ``evaluate_sts`` score one encoder on one dataset; a trainer calls them
for validation and the command-line pipeline (:mod:`text_retrieval.evaluation.pipeline`) for each
model x dataset. They return flat metric keys (``NDCG@10`` ..., ``Recall@1`` for BRIGHT,
``spearman`` ...) plus the magnitude diagnostics of docs/method.md section 3.

Cohen's d of document norms is :func:`clipmag.scoring.diagnostics.document_norm_effect` (its definition,
sizes and seed are written into every result).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from scipy import stats

from clipmag.scoring.diagnostics import document_norm_effect, norm_stats, row_norms
from text_retrieval.data.loaders import BrightDataset, EvalSettings, RetrievalDataset, STSPairs
from text_retrieval.evaluation.bright_scores import add_recall_at_1
from text_retrieval.evaluation.metrics import check_trec_ids, evaluate_run, write_trec_run
from text_retrieval.model.encoder import TextEncoder
from text_retrieval.retrieval.corpus_cache import encode_corpus
from text_retrieval.retrieval.corpus_norms import corpus_norms
from text_retrieval.retrieval.encoding import empty_inputs, evaluation_encoding
from text_retrieval.retrieval.index import RetrievalSettings
from text_retrieval.retrieval.search import retrieve
from text_retrieval.serving.served import open_for_dataset

__all__ = ["evaluate_retrieval", "evaluate_sts"]


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
