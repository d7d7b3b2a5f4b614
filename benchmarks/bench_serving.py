"""Serving speed per head and store at 100,000 documents: build time, queries per second and p50 / p99
latency, each head's index beside the store's plain cosine index over the same vectors.

Does a head that needs the raw inner product, a MIPS column or a learnable transform cost anything
at serve time? The corpus is ``bench_ann_scale.py``'s (functions of site-packages, docstring
summaries as queries), encoded once by all-MiniLM-L6-v2 (``--export``: a trained export) into a
cache. Every head (cosine, dot, qnorm, dnorm, learnable: the export's own gammas, else the initial
ones) stores its transformed documents (``text_retrieval/serving/layout.py``) under the inner
product; the peer is the store's own cosine setting over the raw embeddings (faiss
``normalize_L2`` then inner product, LanceDB ``"cosine"``, Qdrant ``Cosine``), the index a deployer
builds without clipmag. Stores and indexes (``store_indexes.py``): faiss flat, HNSW (efSearch 128)
and IVF (clipmag's default probe count), LanceDB exact and one-graph HNSW (its default ``ef``), and
Qdrant's local mode (exact). A head's query transform is part of its timed search; heads whose
stored documents are alike share an index and its build time (dot and qnorm: raw; cosine and
dnorm: unit length).

Per round (``--rounds``, the sides of a store in rotating order) each side answers all queries in
one batched call (queries per second) and ``--latency-queries`` of them one at a time (p50 and p99
latency); the medians over rounds are reported with each head's ratio to the peer, the median of
the per-round ratios (QPS above 1: the head is faster; p99 above 1: slower).

At 100,000 documents on 2 cores the whole run takes hours (encoding the corpus in fp32 alone takes
over an hour, and Qdrant's local mode scans every point in Python for each query), so each store's
rows are kept under ``--parts`` as it finishes, with what they depend on (corpus, weights, rounds,
threads, CPU and code state): run again, it measures only the stores missing, and the record joins
parts of one machine and commit alone.

    python benchmarks/bench_serving.py --output results/deploy/serving_speed.json   # alone, hours; resumable
    python benchmarks/bench_serving.py --docs 2000 --queries 50 --rounds 1 --output runs/bench_serving/check.json
    python scripts/report.py docs          # renders results/deploy/serving_speed.json into docs/deploy.md
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from bench_ann_scale import add_scale_arguments, corpus_and_queries, encode_both, fingerprint, scale_encoder
from harness import ROOT, code_at_start, load_average, measured_part, print_header, ratio, rounds, spread, write_record
from store_indexes import StoreIndex, build_index

from clipmag.runtime.machine import bf16_units, cpu_name
from clipmag.scoring.heads import SimilarityHead, every_head
from clipmag.storage.naming import model_label
from text_retrieval.retrieval.index import head_transform

INDEXES = ("faiss:flat", "faiss:hnsw", "faiss:ivf", "lancedb:exact", "lancedb:HNSW", "qdrant-local:exact")
PEER = "cosine index"
K = 10


def side_timer(
    index: StoreIndex, head: SimilarityHead | None, queries: np.ndarray, single: np.ndarray
) -> Callable[[], dict[str, float]]:
    """One round of a side: all queries in one call, then ``single`` one at a time. ``head`` None: the
    peer, which sends the raw queries; otherwise the head's query transform is timed with its search."""

    def send(rows: np.ndarray) -> np.ndarray:
        return rows if head is None else head_transform(head, rows, "query")

    def run() -> dict[str, float]:
        start = time.perf_counter()
        index.search(send(queries), K)
        batched = time.perf_counter() - start
        latencies = []
        for row in single:
            start = time.perf_counter()
            index.search(send(row[None, :]), K)
            latencies.append(time.perf_counter() - start)
        milliseconds = 1000 * np.asarray(latencies)
        return {
            "qps": len(queries) / batched,
            "p50_ms": float(np.percentile(milliseconds, 50)),
            "p99_ms": float(np.percentile(milliseconds, 99)),
        }

    return run


def measure_store(
    spec: str, docs: np.ndarray, queries: np.ndarray, heads: dict[str, SimilarityHead], args: argparse.Namespace
) -> dict[str, Any]:
    """Every head's index of one store and kind beside the store's cosine index, timed in rounds:
    ``{"rows": [...]}``, one part of the record (``--parts``)."""
    store, kind = spec.split(":")
    single = queries[: args.latency_queries]
    built: dict[float, StoreIndex] = {}
    peer = build_index(store, kind, "cosine", docs)
    sides: dict[str, Callable[[], dict[str, float]]] = {PEER: side_timer(peer, None, queries, single)}
    indexes = {PEER: peer}
    for name, head in heads.items():
        gd = head.gammas()[1]
        if gd not in built:
            built[gd] = build_index(store, kind, "ip", head_transform(head, docs, "document"))
        indexes[name] = built[gd]
        sides[name] = side_timer(built[gd], head, queries, single)
    print(
        f"\n  {spec}: built (peer {peer.build_s:.1f} s); a warm-up search each, then {args.rounds} rounds", flush=True
    )
    for index in indexes.values():
        index.search(queries, K)
    results = rounds(
        sides, args.rounds, lambda r: f"{r['qps']:8.1f} q/s  p50 {r['p50_ms']:7.2f} ms  p99 {r['p99_ms']:7.2f} ms"
    )
    rows = []
    for name, measured in results.items():
        qps, p99 = [r["qps"] for r in measured], [r["p99_ms"] for r in measured]
        row = {"store": store, "index": kind, "side": name, "build_s": indexes[name].build_s, **indexes[name].described}
        row.update({key: statistics.median(r[key] for r in measured) for key in ("qps", "p50_ms", "p99_ms")})
        row.update(rounds=measured, knob=indexes[name].knob, knob_value=indexes[name].default)
        if name != PEER:
            row["qps_vs_peer"] = statistics.median(ratio(qps, [r["qps"] for r in results[PEER]]))
            row["p99_vs_peer"] = statistics.median(ratio(p99, [r["p99_ms"] for r in results[PEER]]))
        rows.append(row)
    print(f"  {spec}: per head, median of per-round ratios to the {PEER} (QPS above 1: faster; p99 above 1: slower)")
    for row in rows[1:]:
        versus = f"QPS x{row['qps_vs_peer']:.2f}  p99 x{row['p99_vs_peer']:.2f}"
        print(f"    {row['side']:<10} {versus}  build {row['build_s']:.1f} s")
    return {"rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_scale_arguments(parser, "runs/bench_serving")
    parser.add_argument("--latency-queries", type=int, default=200, help="queries timed one at a time per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--parts", default="runs/bench_serving/parts", help="each store's rows as it finishes (a rerun skips them)"
    )
    parser.add_argument("--indexes", nargs="+", default=list(INDEXES), help="STORE:KIND (store_indexes.py)")
    args = parser.parse_args()
    encoder = scale_encoder(parser, args)
    print_header(
        "Serving speed per head and store: build time, QPS and p50 / p99 latency beside the store's cosine index"
    )
    functions, query_texts = corpus_and_queries(args.docs, args.queries)
    texts = [fn.code for fn in functions]
    docs, queries = encode_both(encoder, texts, query_texts, ROOT / args.cache_dir, args.batch_size)
    heads = every_head(encoder.head)
    print(f"  {len(texts)} documents, {len(queries)} queries; heads {', '.join(heads)}", flush=True)
    corpus = {"documents": len(texts), "queries": len(queries), "fingerprint": fingerprint(texts)}
    identity = {
        "corpus": corpus,
        "weights": encoder.weights_fingerprint(),
        "settings": {key: getattr(args, key) for key in ("rounds", "latency_queries", "threads")},
        "cpu": [cpu_name(), *bf16_units()],  # a model name alone spans CPU classes (EPYCs with and without AVX-512)
        "code": code_at_start(),
    }
    rows = []
    for spec in args.indexes:
        measure_now = functools.partial(measure_store, spec, docs, queries, heads, args)
        part = ROOT / args.parts / f"{spec.replace(':', '-')}.json"
        rows += measured_part(part, identity | {"index": spec}, measure_now)["rows"]
    print(f"\n  load average at end (1 / 5 / 15 min): {load_average()}")
    print(f"  {'store, index':<22}{'side':<14}{'QPS':>22}{'p99 ms':>10}{'QPS / peer':>12}")
    for row in rows:
        versus = f"{row['qps_vs_peer']:.2f}" if "qps_vs_peer" in row else "-"
        qps = spread([r["qps"] for r in row["rounds"]], 1)
        print(f"  {row['store'] + ', ' + row['index']:<22}{row['side']:<14}{qps:>22}{row['p99_ms']:>10.2f}{versus:>12}")
    label = model_label(args.export) if args.export else "all-MiniLM-L6-v2"
    heads_described = {name: head.to_dict() | dict(zip(("gq", "gd"), head.gammas())) for name, head in heads.items()}
    figures = {"model": label, "corpus": corpus, "k": K, "heads": heads_described, "rows": rows}
    write_record(ROOT / args.output, "serving_speed", args, figures, leave_out=("cache_dir", "export", "parts"))


if __name__ == "__main__":
    main()
