"""The deploy tables of docs/deploy.md, rendered from the measurements in ``results/deploy/``.

``results/deploy/measure_compression.py`` and ``measure_hybrid.py`` write ``compression.json`` and
``hybrid.json`` (rows, commit, command, numerics); the page's ``<!-- results:deploy-compression -->``
and ``<!-- results:deploy-hybrid -->`` blocks are these renderings, re-rendered and checked by
``clipmag-report docs`` like every other results table, so the page cannot drift from the files.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from clipmag.results.provenance import describe_code
from clipmag_experiments.report.stored import StoredResults

__all__ = ["BLOCKS", "compression_table", "hybrid_table"]


def _measurement(stored: StoredResults, table: str) -> dict[str, Any]:
    """The record ``results/deploy/<table>.json`` (FileNotFoundError before it is measured)."""
    path = stored.root / "deploy" / f"{table}.json"
    record = json.loads(path.read_text(encoding="utf-8"))
    if record.get("table") != table:
        raise ValueError(f"{path}: holds the {record.get('table')!r} table, not {table!r}")
    return record


def _source(record: dict[str, Any]) -> str:
    """Which commit and command measured the rows, and on what."""
    prov, numerics = record["provenance"], record.get("numerics", {})
    command = " ".join(["python", *prov["command"]["argv"]])
    machine = f"{numerics.get('device', '?')}, {numerics.get('torch_threads', '?')} threads, {numerics.get('autocast')}"
    return f"Measured with `{command}` ({describe_code(prov['code'])}, {prov['recorded']}; {machine})."


def _groups(rows: list[dict[str, Any]]) -> dict[tuple, dict[str, dict[str, Any]]]:
    """(dataset, model, head) -> {setting: row}, by data set, then model, then head (each in the order it came)."""
    groups: dict[tuple, dict[str, dict[str, Any]]] = {}
    for row in rows:
        key = row.get("compression", row.get("fusion"))
        groups.setdefault((row["dataset"], row["model"], row["head"]), {})[key] = row
    first = [{value: i for i, value in enumerate(dict.fromkeys(key[part] for key in groups))} for part in range(3)]
    return dict(sorted(groups.items(), key=lambda item: tuple(first[p][item[0][p]] for p in range(3))))


def compression_table(record: dict[str, Any]) -> str:
    rows = record["rows"]
    levels = list(dict.fromkeys(r["compression"].removesuffix("+norm") for r in rows if r["compression"] != "none"))
    header = ["dataset", "model", "head", "fp32", *(f"{level} plain / +norm" for level in levels)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for (dataset, model, head), found in _groups(rows).items():
        cells = [f"{found['none']['ndcg10']:.4f}"]
        cells += [f"{found[level]['ndcg10']:.4f} / {found[level + '+norm']['ndcg10']:.4f}" for level in levels]
        lines.append(f"| {dataset} | {model} | {head} | " + " | ".join(cells) + " |")
    memory = ["", "Memory per vector (bytes), plain / +norm:", "", "| model | fp32 | " + " | ".join(levels) + " |"]
    memory.append("|" + "---|" * (len(levels) + 2))
    for model in dict.fromkeys(r["model"] for r in rows):
        found = {r["compression"]: r["bytes_per_vector"] for r in rows if r["model"] == model}
        cells = [f"{found[level]:g} / {found[level + '+norm']:g}" for level in levels]
        memory.append(f"| {model} | {found['none']:g} | " + " | ".join(cells) + " |")
    return "\n".join(["nDCG@10 (exact search, top 100):", "", *lines, *memory, "", _source(record)])


def hybrid_table(record: dict[str, Any]) -> str:
    def cell(row: dict[str, Any]) -> str:
        if "ndcg10" in row:
            return f"{row['ndcg10']:.4f}"
        return f"{row['accuracy@5']:.3f} / {row['accuracy@20']:.3f}"

    rows = record["rows"]
    header = ["dataset", "model", "head", "dense alone", "+ BM25 rrf", "+ BM25 minmax", "+ BM25 zscore"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    alone = []
    for (dataset, model, head), found in _groups(rows).items():
        if "bm25" in found:
            alone.append(f"{dataset} {cell(found['bm25'])}")
            continue
        cells = [cell(found[f]) for f in ("none", "rrf", "minmax", "zscore")]
        lines.append(f"| {dataset} | {model} | {head} | " + " | ".join(cells) + " |")
    legend = "nDCG@10 on the BEIR sets; accuracy@5 / accuracy@20 (an answer in the top k) on the RAG passages."
    return "\n".join([legend, "", *lines, "", f"BM25 alone: {'; '.join(alone)}.", "", _source(record)])


BLOCKS: dict[str, Callable[[StoredResults], str]] = {
    "deploy-compression": lambda stored: compression_table(_measurement(stored, "compression")),
    "deploy-hybrid": lambda stored: hybrid_table(_measurement(stored, "hybrid")),
}
