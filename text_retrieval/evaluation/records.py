"""Result records: one JSON per model x dataset (metrics, diagnostics, config, versions) and a table.

A record is self-describing: its ``config`` holds the model's head record (the head with its
gammas, pooling, prefixes and max lengths) and the evaluation settings; it also names the dataset
and its source, the library versions and the timings, so a number can be traced back without the
command line that produced it. Its ``model_label`` and ``dataset_label`` name it in the table and
in its file names; two inputs with one label (two sweeps' ``.../cosine/seed0/export``) are told
apart by their parent folders (:func:`clipmag.storage.naming.distinct_labels`).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from clipmag.results.provenance import provenance
from clipmag.results.record import package_versions
from clipmag.storage.naming import model_label, slug
from text_retrieval.data.loaders import RetrievalDataset, STSPairs
from text_retrieval.evaluation.metrics import METRICS
from text_retrieval.model.encoder import TextEncoder

__all__ = ["result_stem", "build_record", "write_record", "format_table", "STS_METRICS"]

STS_METRICS = ("spearman", "pearson", "spearman_reversed", "pearson_reversed", "asymmetry_gap")


def result_stem(model: str, dataset: str, head: str) -> str:
    """The file name (without suffix) of one result: its JSON record and its TREC run alike."""
    return f"{slug(model)}__{slug(dataset)}__{slug(head)}"


def build_record(
    encoder: TextEncoder,
    dataset: RetrievalDataset | STSPairs,
    result: dict[str, Any],
    config: dict[str, Any],
    labels: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """Wrap a pipeline result into the JSON record the command line writes; ``labels`` name the
    model and the dataset in tables and file names (default: their own short names)."""
    is_sts = isinstance(dataset, STSPairs)
    keys = STS_METRICS if is_sts else tuple(METRICS)
    model, data = labels or (model_label(encoder.name_or_path), dataset.name)
    record: dict[str, Any] = {
        "model": encoder.name_or_path,
        "dataset": dataset.name,
        "model_label": model,
        "dataset_label": data,
        "task": "sts" if is_sts else "retrieval",
        "kind": dataset.kind,
        "metrics": {k: result[k] for k in keys},
        "diagnostics": result["diagnostics"],
        "config": {**encoder.head_record().to_dict(), **config, "data_source": dataset.source},
        "versions": package_versions(),
        "provenance": provenance(config),
        "timings": result["timings"],
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    extra = (
        ("num_pairs", "asymmetry_gap_max", "spearman_gap")
        if is_sts
        else ("num_queries", "num_documents", "top_k", "run_file", "search")
    )
    record.update({k: result[k] for k in extra if k in result})
    if not is_sts:
        record["per_query"] = result["per_query"]
    return record


def write_record(record: dict[str, Any], output: str | Path) -> Path:
    """Write ``<output>/<model>__<dataset>__<head>.json`` (the record's labels) and return its path."""
    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
    path = (
        output / f"{result_stem(record['model_label'], record['dataset_label'], record['config']['head']['name'])}.json"
    )
    path.write_text(json.dumps(record, indent=2, allow_nan=True) + "\n", encoding="utf-8")
    return path


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4f}"
    return "" if value is None else str(value)


def format_table(records: Sequence[dict[str, Any]]) -> str:
    """A plain-text table, one row per record, retrieval and STS metrics in their own columns."""
    columns = [
        "model",
        "dataset",
        "head",
        *METRICS,
        "spearman",
        "spearman_reversed",
        "asymmetry_gap",
        "d_norm_cohens_d",
    ]
    rows = []
    for rec in records:
        effect = rec["diagnostics"].get("document_norm_effect", {})
        values = {
            "model": rec["model_label"],
            "dataset": rec["dataset_label"],
            "head": rec["config"]["head"]["name"],
            **rec["metrics"],
            "d_norm_cohens_d": effect.get("cohens_d"),
        }
        rows.append([_cell(values.get(c)) for c in columns])
    widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths))]
    lines.append("  ".join("-" * w for w in widths))
    lines.extend("  ".join(v.ljust(w) for v, w in zip(r, widths)) for r in rows)
    return "\n".join(lines)
