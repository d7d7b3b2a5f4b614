"""Approximate search on real corpora under every head: HNSW and IVF against exact, with and without
the MIPS reduction (``text_retrieval/retrieval/mips.py``).

For each corpus (BEIR SciFact and Cranfield test queries, the bundled RAG passages with their
answerable questions) and each model (all-MiniLM-L6-v2, and a fine-tuned dot-family export when
one is given with ``--export`` or found on disk through ``results/positive_regime``), the corpus is
encoded once into a corpus cache (``--cache-dir``; a later run reads it back). Then, per head
(cosine, dot, qnorm, dnorm, learnable), over the same raw embeddings:

* exact search (``ExactIndex``), the reference and the peer;
* ``hnsw`` and ``ivf`` with ``ann_transform`` ``none`` (the default) and ``mips``: recall@10 against
  exact over all queries, build time, index memory (faiss's serialised size; for exact, the
  transformed corpus it keeps), and query time, timed in rounds with the sides in rotating
  order; the ratio is exact's query time over the index's (above 1: the index is faster).

    python benchmarks/bench_ann_heads.py                       # full corpora; measure on a quiet machine
    python benchmarks/bench_ann_heads.py --quick               # 1,000 documents and 100 queries a corpus
    python benchmarks/bench_ann_heads.py --export runs/.../dot/seed0/export
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import faiss
import numpy as np
from harness import ROOT, load_average, print_header, rounds

from clipmag.scoring.heads import SimilarityHead, every_head
from clipmag.storage.naming import model_label
from text_retrieval.data.loaders import load_beir
from text_retrieval.model.encoder import TextEncoder
from text_retrieval.model.packaged import resolve_model_name
from text_retrieval.rag.bundled import build_rag_bundled
from text_retrieval.rag.data import read_corpus, read_qa
from text_retrieval.retrieval.ann import ApproximateIndex, recall_vs_exact
from text_retrieval.retrieval.corpus_cache import encode_corpus
from text_retrieval.retrieval.index import RetrievalSettings
from text_retrieval.retrieval.search import ExactIndex

SHARED = ROOT.parent / "shared" / "data"
DOT_FAMILY = ("dot", "qnorm", "learnable")  # heads under which documents keep a magnitude
VARIANTS = [(method, transform) for method in ("hnsw", "ivf") for transform in ("none", "mips")]


def corpora(rag_root: Path) -> dict[str, tuple[list[str], list[str]]]:
    """(document texts, query texts) of each corpus, the bundled RAG set built under ``rag_root`` if absent."""
    found = {}
    for name in ("scifact", "cranfield"):
        data = load_beir(SHARED / "beir" / name, split="test")
        found[name] = (list(data.corpus_texts), [data.queries[q] for q in data.query_ids])
    root = build_rag_bundled(rag_root, SHARED / "qa" / "dpr")
    passages = read_corpus(root).passages
    questions = read_qa(root / "answerable.jsonl").questions
    found["rag-bundled"] = ([p.retrieval_text for p in passages], [q.text for q in questions])
    return found


def find_export(named_in: Path) -> tuple[str | None, str]:
    """A dot-family export that results under ``named_in`` name and that exists here, and what was looked at."""
    named = []
    for path in sorted(named_in.glob("**/results.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        head, export = record.get("head", {}).get("head", {}).get("name"), record.get("checkpoint", {}).get("path")
        if head in DOT_FAMILY and export:
            named.append(export)
            if (ROOT / export).is_dir():
                return str(ROOT / export), f"found through {path.relative_to(ROOT)}"
    return None, f"none present: {len(named)} dot-family exports named under {named_in.relative_to(ROOT)}, none here"


def cached_queries(encoder: TextEncoder, texts: list[str], cache_dir: Path) -> np.ndarray:
    """Query embeddings, from ``cache_dir`` when this model and its query settings encoded these texts before."""
    identity = [encoder.name_or_path, encoder.weights_fingerprint(), encoder.pooling, encoder.query_prefix]
    identity += [str(encoder.query_max_length), *texts]
    path = cache_dir / f"queries__{hashlib.sha1(chr(0).join(identity).encode()).hexdigest()[:16]}.npy"
    if not path.is_file():
        cache_dir.mkdir(parents=True, exist_ok=True)
        np.save(path, encoder.encode(texts, "query", show_progress=False))
    return np.load(path)


def bench_head(
    name: str, head: SimilarityHead, docs: np.ndarray, queries: np.ndarray, k: int, n_rounds: int
) -> list[dict[str, Any]]:
    """Build every index under ``head``, measure recall against exact and time the searches."""
    start = time.perf_counter()
    exact = ExactIndex(docs, head)
    built: dict[str, Any] = {"exact": (exact, time.perf_counter() - start)}
    for method, transform in VARIANTS:
        start = time.perf_counter()
        index = ApproximateIndex(docs, head, RetrievalSettings(method=method, ann_transform=transform))
        built[f"{method}/{transform}"] = (index, time.perf_counter() - start)
    for index, _ in built.values():
        index.search(queries, k)  # warm-up (exact: the backend's timed choice)

    def timed(index: Any) -> Callable[[], float]:
        def run() -> float:
            start = time.perf_counter()
            index.search(queries, k)
            return time.perf_counter() - start

        return run

    print(f"  head {name} (gq, gd = {head.gammas()[0]:.2f}, {head.gammas()[1]:.2f})", flush=True)
    seconds = rounds({side: timed(index) for side, (index, _) in built.items()}, n_rounds, lambda s: f"{s:.4f} s")
    exact_s = statistics.median(seconds["exact"])
    rows = []
    for side, (index, build_s) in built.items():
        query_s = statistics.median(seconds[side])
        row = {"head": name, "side": side, "build_s": build_s, "query_ms": 1000 * query_s / len(queries)}
        row["speedup_vs_exact"] = exact_s / query_s
        if side == "exact":
            row.update(recall=1.0, memory_mb=docs.shape[0] * docs.shape[1] * 4 / 2**20, described=index.described)
        else:
            row["recall"] = recall_vs_exact(index, exact, queries, k=k, sample=len(queries))[f"recall@{k}"]
            row["memory_mb"] = faiss.serialize_index(index.index).nbytes / 2**20
            row["described"] = index.described
        rows.append(row)
    return rows


def print_table(label: str, rows: list[dict[str, Any]], k: int) -> None:
    print(f"\n  {label}: recall@{k} against exact; query time per query; ratio exact time / index time")
    print(f"  {'head':<10}{'side':<12}{'recall':>8}{'build s':>9}{'query ms':>10}{'memory MB':>11}{'ratio':>7}")
    for row in rows:
        print(
            f"  {row['head']:<10}{row['side']:<12}{row['recall']:>8.3f}{row['build_s']:>9.2f}"
            f"{row['query_ms']:>10.3f}{row['memory_mb']:>11.1f}{row['speedup_vs_exact']:>7.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1,000 documents, 100 queries a corpus, one round")
    parser.add_argument("--docs", type=int, default=None, help="the first N documents of each corpus")
    parser.add_argument("--queries", type=int, default=None, help="the first N queries of each corpus")
    parser.add_argument("--rounds", type=int, default=None, help="timed rounds (default 3, --quick 1)")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--export", default=None, help="a fine-tuned dot-family export (default: one found on disk)")
    parser.add_argument("--max-length", type=int, default=None, help="cap on both sides' token lengths")
    parser.add_argument("--cache-dir", default="runs/bench_ann_heads/cache", help="corpus and query embeddings")
    parser.add_argument("--rag-root", default="runs/data/rag-bundled", help="bundled RAG set (built if missing)")
    parser.add_argument("--output", default="runs/bench_ann_heads/results.json", help="every row as JSON")
    args = parser.parse_args()
    if args.export and not Path(args.export).is_dir():
        parser.error(f"--export {args.export}: no such folder (a clipmag export: the model with its head record)")
    n_docs = args.docs or (1000 if args.quick else None)
    n_queries = args.queries or (100 if args.quick else None)
    n_rounds = args.rounds or (1 if args.quick else 3)

    print_header("approximate search per head on real corpora: HNSW and IVF, with and without the MIPS reduction")
    export, how = (args.export, "given with --export") if args.export else find_export(ROOT / "results/positive_regime")
    print(f"  fine-tuned dot-family export: {export or '-'} ({how})")
    models = [resolve_model_name("all-MiniLM-L6-v2")] + ([export] if export else [])
    cache_dir, results = ROOT / args.cache_dir, []
    texts = corpora(ROOT / args.rag_root)
    for model in models:
        lengths = {"max_length": args.max_length} if args.max_length else {}
        encoder = TextEncoder.from_pretrained(model, **lengths)
        for corpus, (documents, questions) in texts.items():
            documents, questions = documents[:n_docs], questions[:n_queries]
            docs = encode_corpus(encoder, documents, cache_dir, corpus, show_progress=False)
            queries = cached_queries(encoder, questions, cache_dir)
            label = f"{corpus} ({len(documents)} documents, {len(questions)} queries), {model_label(model)}"
            print(f"\n{label}", flush=True)
            heads = every_head(encoder.head).items()  # a learnable model keeps its learned gammas
            rows = [row for name, head in heads for row in bench_head(name, head, docs, queries, args.k, n_rounds)]
            print_table(label, rows, args.k)
            results += [{"corpus": corpus, "model": model, "documents": len(documents), **row} for row in rows]
    print(f"\n  load average at end (1 / 5 / 15 min): {load_average()}")
    output = ROOT / args.output
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps({"export": export, "export_note": how, "rows": results}, indent=1, default=str) + "\n")
    print(f"  rows written to {output}")


if __name__ == "__main__":
    main()
