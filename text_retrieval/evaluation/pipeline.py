"""The command-line evaluation pipeline: every model on every dataset, one JSON and one TREC run each.

Load the models and the datasets, score each pair with the scorers of
:mod:`text_retrieval.evaluation.evaluate`, and write one JSON per model x dataset and a TREC run per
retrieval set, each named by the model's and the dataset's labels (distinct even where two inputs
share a folder name). A table of the results is printed at the end.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from clipmag.results.record import encoding_numerics
from clipmag.storage.naming import distinct_labels, model_label
from text_retrieval.data.loaders import BrightDataset, EvalSettings, STSPairs, load_eval_datasets
from text_retrieval.evaluation.bright_scores import bright_summary
from text_retrieval.evaluation.evaluate import evaluate_retrieval, evaluate_sts
from text_retrieval.evaluation.records import build_record, format_table, result_stem, write_record
from text_retrieval.model.encoder import TextEncoder
from text_retrieval.retrieval.encoding import with_export_lengths
from text_retrieval.retrieval.index import RetrievalSettings

logger = logging.getLogger("clipmag")

__all__ = ["evaluate_paths"]


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
