"""The deploy tables of docs/deploy.md, rendered from the measurements in ``results/deploy/``.

``results/deploy/measure_compression.py`` and ``measure_hybrid.py`` write ``compression.json`` and
``hybrid.json`` (rows, commit, command, numerics); the page's ``<!-- results:deploy-compression -->``
and ``<!-- results:deploy-hybrid -->`` blocks are these renderings, re-rendered and checked by
``clipmag-report docs`` like every other results table, so the page cannot drift from the files.
``benchmarks/bench_ann_scale.py --output results/deploy/ann_scale.json`` writes the approximate-search
record at scale (``deploy-ann-scale``, and the ``ann-scale-knob`` values of the advice beside it);
until that file exists they say it is not measured and name the command.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clipmag.results.provenance import describe_code
from clipmag_experiments.report.stored import StoredResults, cpu_with_units

__all__ = [
    "BLOCKS",
    "VALUES",
    "ANN_SCALE_FILE",
    "ann_scale_table",
    "benchmark_record",
    "compression_table",
    "hybrid_table",
    "smallest_setting",
]

ANN_SCALE_FILE = "ann_scale.json"
ANN_SCALE_COMMAND = "python benchmarks/bench_ann_scale.py --output results/deploy/ann_scale.json"
RECALL_TARGET = 0.95  # the recall@10 the advice's search-time settings reach
_NOT_MEASURED = f"not measured yet (`{ANN_SCALE_COMMAND}`, then `python scripts/report.py docs`)"


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
    argv = list(prov["command"]["argv"])
    if "--output" in argv[:-1] and Path(argv[argv.index("--output") + 1]).is_absolute():
        # written outside the checkout (a clean tree stays clean) and committed here, where the command
        # without --output writes it: the page shows that command, the record keeps the one that ran
        at = argv.index("--output")
        argv = argv[:at] + argv[at + 2 :]
    command = " ".join(["python", *argv])
    where = numerics.get("cpu") or numerics.get("device", "?")  # records before the CPU's name give the device
    if "cpu_bf16" in numerics:
        where = cpu_with_units(where, numerics["cpu_bf16"])
    machine = f"{where}, {numerics.get('torch_threads', '?')} threads, {numerics.get('autocast')}"
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


def benchmark_record(stored: StoredResults, benchmark: str) -> dict[str, Any] | None:
    """The benchmark record ``results/deploy/<benchmark>.json`` (``None`` before it is measured)."""
    path = stored.root / "deploy" / f"{benchmark}.json"
    if not path.is_file():
        return None
    record = json.loads(path.read_text(encoding="utf-8"))
    if record.get("benchmark") != benchmark:
        raise ValueError(f"{path}: holds the {record.get('benchmark')!r} benchmark, not {benchmark!r}")
    return record


def _ann_scale(stored: StoredResults) -> dict[str, Any] | None:
    return benchmark_record(stored, ANN_SCALE_FILE.removesuffix(".json"))


def smallest_setting(rows: list[dict[str, Any]]) -> str:
    """The smallest knob value at which every row of ``rows`` (one method's, across heads) reaches
    ``RECALL_TARGET``, as ``efSearch 64``; else that none measured does."""
    reached = sorted(
        value
        for value in {r["value"] for r in rows}
        if min(r["recall"] for r in rows if r["value"] == value) >= RECALL_TARGET
    )
    knob = rows[0]["knob"]
    return f"{knob} {reached[0]}" if reached else f"no {knob} measured (largest {max(r['value'] for r in rows)})"


def ann_scale_table(record: dict[str, Any] | None) -> str:
    """Recall@10 per head and layout, one column per efSearch (HNSW) and nprobe (IVF)."""
    if record is None:
        return f"HNSW and IVF recall@10 at scale: {_NOT_MEASURED}."
    rows = record["rows"]
    columns = list(dict.fromkeys((r["method"], r["knob"], r["value"]) for r in rows))
    header = ["head", "stored as", *(f"{method.upper()} {knob} {value}" for method, knob, value in columns)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    found: dict[tuple, dict[tuple, float]] = {}
    for r in rows:
        found.setdefault((r["head"], r["layout"]), {})[(r["method"], r["knob"], r["value"])] = r["recall"]
    for (head, layout), recalls in found.items():
        lines.append(f"| {head} | {layout} | " + " | ".join(f"{recalls[c]:.3f}" for c in columns) + " |")
    corpus, settings = record["corpus"], record["settings"]
    first = next(r for r in rows if r["method"] == "ivf")
    hnsw = next(r for r in rows if r["method"] == "hnsw")
    command = f"python benchmarks/bench_ann_scale.py --docs {settings['docs']} --queries {settings['queries']}"
    return "\n".join(
        [
            f"recall@{record['k']} against exact search, {corpus['documents']:,} functions and {corpus['queries']:,} "
            f"docstring queries, {record['model']}, max length {settings['max_length']}; HNSW M = {hnsw['M']}, "
            f"IVF {first['nlist']} lists:",
            "",
            *lines,
            "",
            f"Measured with `{command}` ({describe_code(record['code'])}; {record['cpu']}, "
            f"{record['threads']} threads).",
        ]
    )


def ann_scale_knob(stored: StoredResults, argument: str) -> str:
    """``METHOD/LAYOUT``: the smallest efSearch (hnsw) or nprobe (ivf) at which every dot-family head
    stored as LAYOUT (``ip``, ``mips-l2``; ``cosine``: the control) reaches ``RECALL_TARGET``."""
    method, _, layout = argument.partition("/")
    record = _ann_scale(stored)
    if record is None:
        return "(not measured yet)"
    rows = [r for r in record["rows"] if r["method"] == method]
    if layout == "cosine":
        picked = [r for r in rows if r["head"] == "cosine"]
    else:
        picked = [r for r in rows if r["layout"] == layout and r["head"] != "cosine"]
    if not picked:
        raise KeyError(f"ann-scale-knob:{argument}: no {method} rows stored as {layout}")
    return smallest_setting(picked)


def fp32_baseline(stored: StoredResults, argument: str = "") -> str:
    """Whether compression.json and hybrid.json give each (data set, model, head) one fp32 nDCG@10,
    the score their compression and fusion deltas are read against; else the largest difference."""
    compression, hybrid = _measurement(stored, "compression"), _measurement(stored, "hybrid")
    first = {
        (r["dataset"], r["model"], r["head"]): r["ndcg10"] for r in compression["rows"] if r["compression"] == "none"
    }
    beir = [r for r in hybrid["rows"] if r["fusion"] == "none" and "ndcg10" in r]  # the RAG rows hold accuracy
    second = {(r["dataset"], r["model"], r["head"]): r["ndcg10"] for r in beir}
    shared = [key for key in first if key in second]
    if not shared:
        raise KeyError("compression.json and hybrid.json share no fp32 row")
    gaps = {key: abs(first[key] - second[key]) for key in shared}
    worst = max(shared, key=gaps.__getitem__)
    differ = sum(gap >= 5e-5 for gap in gaps.values())
    if not differ:
        return f"the same fp32 nDCG@10 in both records (all {len(shared)} rows)"
    return (
        f"up to {gaps[worst]:.4f} apart ({' / '.join(worst)}: {second[worst]:.4f} in hybrid.json, "
        f"{first[worst]:.4f} in compression.json; {differ} of {len(shared)} rows differ)"
    )


BLOCKS: dict[str, Callable[[StoredResults], str]] = {
    "deploy-compression": lambda stored: compression_table(_measurement(stored, "compression")),
    "deploy-hybrid": lambda stored: hybrid_table(_measurement(stored, "hybrid")),
    "deploy-ann-scale": lambda stored: ann_scale_table(_ann_scale(stored)),
}
VALUES: dict[str, Callable[[StoredResults, str], str]] = {
    "ann-scale-knob": ann_scale_knob,
    "deploy-fp32-baseline": fp32_baseline,
}
