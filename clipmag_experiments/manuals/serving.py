"""The serving measurements of docs/deploy.md for trained exports, rendered from their records.

``benchmarks/bench_ann_trained.py measure --output results/deploy/ann_trained.json`` writes recall@10
at 100,000 documents per model, head, store, index, layout and knob (``deploy-ann-trained``, with the
``ann-trained-knob``, ``ann-ivf-default`` and ``ann-trained-pq`` values of the advice beside it);
``benchmarks/bench_serving.py --output results/deploy/serving_speed.json`` writes build time, queries
per second and latency per head and store beside the store's cosine index (``deploy-serving-speed``,
read against a control in ``deploy-serving-reading``).
Until a record exists its block and values say it is not measured and name the command.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from clipmag.results.provenance import describe_code
from clipmag_experiments.manuals.deploy import benchmark_record, smallest_setting
from clipmag_experiments.report.stored import StoredResults, cpu_with_units

__all__ = ["BLOCKS", "VALUES", "ann_trained_table", "lance_pq_default", "serving_speed_reading", "serving_speed_table"]

ANN_TRAINED_COMMAND = "python benchmarks/bench_ann_trained.py measure --output results/deploy/ann_trained.json"
SPEED_COMMAND = "python benchmarks/bench_serving.py --output results/deploy/serving_speed.json"


def _not_measured(what: str, command: str) -> str:
    return f"{what}: not measured yet (`{command}`, then `python scripts/report.py docs`)."


def _machine(record: dict[str, Any]) -> str:
    """The code and the CPU of a record (its bf16 units named) and its threads."""
    cpu = cpu_with_units(record["cpu"], record.get("cpu_bf16") or [])
    return f"{describe_code(record['code'])}; {cpu}, {record['threads']} threads"


def _setting(row: dict[str, Any]) -> str:
    value = "default" if row["value"] is None else str(row["value"])
    return f"{value}*" if row["default"] and row["value"] is not None else value


def ann_trained_table(record: dict[str, Any] | None) -> str:
    """Recall@10 per model, head, layout, store and index, the knob's values in one cell."""
    if record is None:
        return _not_measured("Recall@10 of trained exports at scale", ANN_TRAINED_COMMAND)
    found: dict[tuple, list[dict[str, Any]]] = {}
    for row in record["rows"]:
        found.setdefault((row["model"], row["head"], row["layout"], row["store"], row["index"]), []).append(row)
    header = "| model | head | stored as | store | index | knob | recall@10 at each setting |"
    lines = [header, "|---|---|---|---|---|---|---|"]
    for (model, head, layout, store, index), rows in found.items():
        cells = ", ".join(f"{_setting(r)}: {r['recall']:.3f}" for r in rows)
        lines.append(f"| {model} | {head} | {layout} | {store} | {index} | {rows[0]['knob'] or '-'} | {cells} |")
    corpus, models = record["corpus"], record["models"]
    trained = ", ".join(f"{m['label']} ({_gammas(m['head'])})" for m in models if m["trained"])
    control = ", ".join(m["label"] for m in models if not m["trained"])
    settings = record["settings"]
    return "\n".join(
        [
            f"recall@{record['k']} against exact search of the same stored vectors, {corpus['documents']:,} functions "
            f"and {corpus['queries']:,} docstring queries, max length {settings['max_length']}; exports {trained}; "
            f"control {control} (untrained). `*`: clipmag's default (faiss efSearch, nprobe); `default`: the "
            "store's own.",
            "",
            *lines,
            "",
            f"Measured with `{ANN_TRAINED_COMMAND}` ({_machine(record)}).",
        ]
    )


def _gammas(head: dict[str, Any]) -> str:
    if "gq" not in head:
        return head["name"]
    return f"{head['name']}, gq {head['gq']:.2f}, gd {head['gd']:.2f}"


def _trained_rows(stored: StoredResults) -> list[dict[str, Any]] | None:
    """Each trained export's rows under its own head (``None`` before the record exists)."""
    record = benchmark_record(stored, "ann_trained")
    if record is None:
        return None
    own = {m["label"]: m["head"]["name"] for m in record["models"] if m["trained"]}
    return [r for r in record["rows"] if r["model"] in own and r["head"] in (own[r["model"]], "cosine")]


def ann_trained_knob(stored: StoredResults, argument: str) -> str:
    """``METHOD/LAYOUT``: the smallest faiss efSearch (hnsw) or nprobe (ivf) at which every trained
    export whose documents keep their norm (gd < 1), under its own head stored as LAYOUT, reaches
    the recall target; ``METHOD/cosine``: the exports' cosine heads."""
    method, _, layout = argument.partition("/")
    rows = _trained_rows(stored)
    if rows is None:
        return "(not measured yet)"
    rows = [r for r in rows if r["store"] == "faiss" and r["index"] == method]
    if layout == "cosine":
        picked = [r for r in rows if r["head"] == "cosine"]
    else:
        picked = [r for r in rows if r["layout"] == layout and r["head"] != "cosine" and r["gd"] < 1.0]
    if not picked:
        raise KeyError(f"ann-trained-knob:{argument}: no trained faiss {method} rows stored as {layout}")
    return smallest_setting(picked)


def ann_ivf_default(stored: StoredResults, argument: str) -> str:
    """``LAYOUT``: recall@10 of faiss IVF at clipmag's default probe count, each trained export under
    its own head stored as LAYOUT, as ``qnorm 0.912, dot 0.905``."""
    rows = _trained_rows(stored)
    if rows is None:
        return "(not measured yet)"
    picked = [
        r for r in rows if r["store"] == "faiss" and r["index"] == "ivf" and r["default"] and r["layout"] == argument
    ]
    own = [r for r in picked if r["head"] != "cosine"]
    if not own:
        raise KeyError(f"ann-ivf-default:{argument}: no trained faiss IVF rows at the default probe count")
    return f"nprobe {own[0]['value']}: " + ", ".join(f"{r['model']} {r['recall']:.3f}" for r in own)


def lance_pq_default(stored: StoredResults, argument: str = "") -> str:
    """Recall@10 of LanceDB's default index (``IVF_PQ`` at its own ``nprobes``) per trained export under
    its own head, its cosine head beside it, as ``qnorm 0.374 (its cosine 0.443)``."""
    rows = _trained_rows(stored)
    if rows is None:
        return "(not measured yet)"
    found: dict[str, dict[str, float]] = {}
    for r in rows:
        if r["store"] == "lancedb" and r["index"] == "IVF_PQ" and r["default"]:
            found.setdefault(r["model"], {})["cosine" if r["head"] == "cosine" else "own"] = r["recall"]
    if not found:
        raise KeyError("ann-trained-pq: no trained LanceDB IVF_PQ rows at the store's default nprobes")
    parts = [
        f"{model} {by['own']:.3f}" + (f" (its cosine {by['cosine']:.3f})" if "cosine" in by else "")
        for model, by in found.items()
    ]
    return ", ".join(parts)


def serving_speed_table(record: dict[str, Any] | None) -> str:
    """Build time, queries per second, p50 / p99 latency per store, index and side, with the ratios."""
    if record is None:
        return _not_measured("Serving speed per head and store", SPEED_COMMAND)
    header = "| store | index | side | build s | QPS | p50 ms | p99 ms | QPS / cosine index | p99 / cosine index |"
    lines = [header, "|---|---|---|---|---|---|---|---|---|"]
    for r in record["rows"]:
        versus = [f"{r[key]:.2f}" if key in r else "-" for key in ("qps_vs_peer", "p99_vs_peer")]
        cells = [r["store"], r["index"], r["side"], f"{r['build_s']:.1f}", f"{r['qps']:.0f}"]
        cells += [f"{r['p50_ms']:.2f}", f"{r['p99_ms']:.2f}", *versus]
        lines.append("| " + " | ".join(cells) + " |")
    corpus, settings = record["corpus"], record["settings"]
    command = f"python benchmarks/bench_serving.py --docs {settings['docs']} --queries {settings['queries']}"
    return "\n".join(
        [
            f"{corpus['documents']:,} functions, {record['model']}; QPS: {corpus['queries']:,} queries in one call; "
            f"p50 / p99: {settings['latency_queries']} queries one at a time; medians of {settings['rounds']} "
            "rounds, ratios the medians of the per-round ratios to the store's cosine index over the raw "
            f"embeddings (top {record['k']}):",
            "",
            *lines,
            "",
            f"Measured with `{command}` ({_machine(record)}).",
        ]
    )


CONTROL = "cosine"  # the cosine head searches the cosine index's own vectors through clipmag's transform


def _over_peer(rows: list[dict[str, Any]], key: str) -> dict[str, list[float]]:
    """Each side's per-round ``key`` over the cosine index's, in the rounds both ran."""
    by_side = {r["side"]: [m[key] for m in r["rounds"]] for r in rows}
    peer = by_side.pop("cosine index")
    return {side: [a / b for a, b in zip(values, peer)] for side, values in by_side.items()}


def _verdict(head: list[float], control: list[float]) -> str:
    """Where every round of ``head`` lies against the control's range: below, above, or within it."""
    if max(head) < min(control):
        return "below the control's"
    if min(head) > max(control):
        return "above the control's"
    return "within the control's"


def _span(values: list[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f}"


def serving_speed_reading(record: dict[str, Any] | None) -> str:
    """Per store and index, each head's per-round QPS and p99 ratios to the store's cosine index
    beside the control's (the cosine head, on the very vectors of that index, through the same
    transform call as every head): a head is read as below or above it only where every round lies
    outside the control's range. Descriptive, not a test: a few rounds on one machine, whose
    run-to-run spread the control shows."""
    if record is None:
        return _not_measured("The reading of the serving speed", SPEED_COMMAND)
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in record["rows"]:
        groups.setdefault((row["store"], row["index"]), []).append(row)
    lines = []
    for (store, index), rows in groups.items():
        qps_of, p99_of = _over_peer(rows, "qps"), _over_peer(rows, "p99_ms")
        qps_control, p99_control = qps_of.pop(CONTROL), p99_of.pop(CONTROL)
        read = [f"control QPS {_span(qps_control)}, p99 {_span(p99_control)}"]
        for side, qps in qps_of.items():
            p99 = p99_of[side]
            read.append(
                f"{side} QPS {_span(qps)}, {_verdict(qps, qps_control)}, p99 {_span(p99)}, {_verdict(p99, p99_control)}"
            )
        lines.append(f"* {store} {index}: " + "; ".join(read) + ".")
    intro = (
        "Each side's QPS and p99 over the cosine index's, per round, as ranges over the "
        f"{record['settings']['rounds']} rounds. The control is the {CONTROL} head: it searches that index's own "
        "vectors through clipmag's query transform (a normalisation, timed as every head's is), so its range holds "
        "the rounds' spread and the cost of the transform call, and a head's range beside it shows what its own "
        "index costs. A head is read as below or above the control only where every round lies outside the "
        "control's range (a description of these rounds, not a test):"
    )
    return "\n".join([intro, "", *lines])


BLOCKS: dict[str, Callable[[StoredResults], str]] = {
    "deploy-ann-trained": lambda stored: ann_trained_table(benchmark_record(stored, "ann_trained")),
    "deploy-serving-speed": lambda stored: serving_speed_table(benchmark_record(stored, "serving_speed")),
    "deploy-serving-reading": lambda stored: serving_speed_reading(benchmark_record(stored, "serving_speed")),
}
VALUES: dict[str, Callable[[StoredResults, str], str]] = {
    "ann-trained-knob": ann_trained_knob,
    "ann-ivf-default": ann_ivf_default,
    "ann-trained-pq": lance_pq_default,
}
