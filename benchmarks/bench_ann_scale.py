"""HNSW and IVF recall@10 per head at 100,000+ real documents, across efSearch and nprobe, for the
three ways a vector store can hold a head's documents.

The corpus is built offline from the Python source installed beside clipmag: every function and
method of the top-level packages under ``site-packages`` (``text_retrieval/data/bundled/extract.py``:
docstring removed, tests and vendored code skipped, duplicates dropped), packages in sorted order,
the first ``--docs`` functions kept. The queries are the docstring summaries of a seeded sample of
``--queries`` of them. all-MiniLM-L6-v2 (untuned, the model ``bench_ann_heads.py`` measures; an
export with ``--export``) encodes both once, into a corpus cache (``--cache-dir``, resumable); the
heads are applied to the same raw embeddings, as the existing approximate-search benchmark does:
dot, qnorm and learnable (the model's own gammas if it learned them, else the learnable head's
initial ones) and cosine. Per head, over the head-transformed documents and queries:

* ``ip``: faiss ``METRIC_INNER_PRODUCT`` (what a store's inner-product setting does);
* ``mips-l2``: the MIPS-to-L2 reduction, each document given the coordinate ``sqrt(M^2 - |d|^2)``
  (``text_retrieval/retrieval/mips.py``), the query a zero, searched under ``METRIC_L2``;
* the cosine head under ``ip`` is the control: unit vectors, where HNSW and IVF are usually tuned.

Each index is built at the settings of ``text_retrieval/retrieval/ann.py`` (HNSW M = 32; IVF with
``4 sqrt(N)`` lists) and searched at every ``--ef-search`` and ``--nprobe``; recall@10 is the mean
overlap of its top 10 with exact inner-product search of the same vectors. Documents that share one
stored form share an index (dot and qnorm: both raw).

    python benchmarks/bench_ann_scale.py --output results/deploy/ann_scale.json   # 100,000 documents; alone
    python benchmarks/bench_ann_scale.py --docs 2000 --queries 100 --output runs/bench_ann_scale/check.json
    python scripts/report.py docs                      # renders results/deploy/ann_scale.json into docs/deploy.md
"""

from __future__ import annotations

import argparse
import hashlib
import site
import sys
import time
from pathlib import Path
from typing import Any

import faiss
import numpy as np
import torch
from harness import ROOT, code_at_start, load_average, print_header, write_record

from clipmag.scoring.heads import SimilarityHead, every_head
from clipmag.storage.naming import model_label
from text_retrieval.data.bundled.extract import CodeFunction, extract_functions
from text_retrieval.model.encoder import TextEncoder
from text_retrieval.model.packaged import resolve_model_name
from text_retrieval.retrieval.ann import new_faiss_index
from text_retrieval.retrieval.corpus_cache import encode_corpus
from text_retrieval.retrieval.index import head_transform
from text_retrieval.retrieval.mips import augment_documents, augment_queries

HEADS = ("cosine", "dot", "qnorm", "learnable")
LAYOUTS = {"ip": faiss.METRIC_INNER_PRODUCT, "mips-l2": faiss.METRIC_L2}
EF_SEARCH = (16, 32, 64, 128, 256)
NPROBE = (1, 4, 16, 64, 256)
K = 10


def site_packages() -> Path:
    """The site-packages folder of the running environment (where clipmag's dependencies are)."""
    found = [Path(p) for p in site.getsitepackages() if Path(p).name == "site-packages" and Path(p).is_dir()]
    if not found:
        raise SystemExit("error: no site-packages folder in this environment to build the corpus from")
    return found[0]


def code_corpus(root: Path, n_docs: int) -> list[CodeFunction]:
    """The first ``n_docs`` distinct functions of the packages under ``root``, packages in sorted order."""
    functions: list[CodeFunction] = []
    seen: set[str] = set()
    for package in sorted(p for p in root.iterdir() if p.is_dir() and p.name.isidentifier()):
        for fn in extract_functions(package, prefix=package.name + "/"):
            key = " ".join(fn.code.split())
            if key not in seen:
                seen.add(key)
                functions.append(fn)
        if len(functions) >= n_docs:
            break
    if len(functions) < n_docs:
        raise SystemExit(f"error: {root} holds {len(functions)} distinct functions, fewer than --docs {n_docs}")
    return functions[:n_docs]


def fingerprint(texts: list[str]) -> str:
    return hashlib.sha256("\0".join(texts).encode()).hexdigest()[:16]


def corpus_and_queries(n_docs: int, n_queries: int) -> tuple[list[CodeFunction], list[str]]:
    """The first ``n_docs`` functions of site-packages and the docstring summaries of a seeded sample
    of ``n_queries`` of them: the corpus every scale benchmark measures."""
    root = site_packages()
    functions = code_corpus(root, n_docs)
    summaries = [fn.summary for fn in functions if fn.summary]
    picked = np.sort(np.random.default_rng(0).permutation(len(summaries))[:n_queries])
    print(f"  corpus: {len(functions)} functions of {root}; {len(picked)} docstring summaries as queries")
    return functions, [summaries[i] for i in picked]


def encode_both(
    encoder: TextEncoder, texts: list[str], queries: list[str], cache: Path, batch_size: int
) -> tuple[np.ndarray, np.ndarray]:
    """Raw document (through the corpus cache under ``cache``) and query embeddings, float32."""
    start = time.perf_counter()
    docs = encode_corpus(encoder, texts, cache, "code-scale", fingerprint(texts), batch_size)
    sent = encoder.encode(queries, "query", batch_size, show_progress=False)
    print(f"  encoded in {time.perf_counter() - start:.0f} s; measuring", flush=True)
    return np.ascontiguousarray(docs, dtype=np.float32), np.ascontiguousarray(sent, dtype=np.float32)


def add_scale_arguments(parser: argparse.ArgumentParser, runs: str) -> None:
    """The flags of a benchmark over this corpus: its size, the model, the cache and the record."""
    parser.add_argument("--docs", type=int, default=100_000, help="documents: the first N functions found")
    parser.add_argument("--queries", type=int, default=1_000, help="queries: a seeded sample of the summaries")
    parser.add_argument("--export", default=None, help="an export to encode with instead of all-MiniLM-L6-v2")
    parser.add_argument("--max-length", type=int, default=128, help="token cap on both sides")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--cache-dir", default=f"{runs}/cache", help="corpus embeddings (resumable)")
    parser.add_argument("--output", default=f"{runs}/results.json", help="the record (JSON)")


def scale_encoder(parser: argparse.ArgumentParser, args: argparse.Namespace) -> TextEncoder:
    """The model of ``--export`` (else all-MiniLM-L6-v2 as shipped) at ``--max-length``, on ``--threads``."""
    if args.export and not Path(args.export).is_dir():
        parser.error(f"--export {args.export}: no such folder (a clipmag export)")
    torch.set_num_threads(args.threads)
    faiss.omp_set_num_threads(args.threads)
    code_at_start()
    return TextEncoder.from_pretrained(
        args.export or resolve_model_name("all-MiniLM-L6-v2"), max_length=args.max_length
    )


def exact_top(docs: np.ndarray, queries: np.ndarray, metric: int) -> np.ndarray:
    """The exact top ``K`` positions (inner product; L2 for the reduced layout, which orders alike)."""
    index = faiss.IndexFlat(docs.shape[1], metric)
    index.add(docs)
    return index.search(queries, K)[1]


def recall(found: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean([len(set(a.tolist()) & set(b.tolist())) / K for a, b in zip(found, truth)]))


def stored(head: SimilarityHead, docs: np.ndarray, queries: np.ndarray, layout: str) -> tuple[np.ndarray, np.ndarray]:
    """The vectors a store holds and is sent under ``layout`` for ``head``."""
    side_d, side_q = head_transform(head, docs, "document"), head_transform(head, queries, "query")
    if layout == "ip":
        return side_d, side_q
    largest = float(np.linalg.norm(side_d, axis=1).max())
    return augment_documents(side_d, largest), augment_queries(side_q)


def build(method: str, docs: np.ndarray, metric: int) -> tuple[faiss.Index, dict[str, Any]]:
    """One ``method`` index of ``docs`` at ann.py's settings, and what the record says of it."""
    index, parameters = new_faiss_index(method, docs.shape[1], len(docs), metric)
    start = time.perf_counter()
    if method == "ivf":
        index.train(docs)
    index.add(docs)
    described = {k: v for k, v in parameters.items() if k in ("M", "efConstruction", "nlist")}
    return index, {**described, "build_s": time.perf_counter() - start}


def sweep(method: str, index: faiss.Index, queries: np.ndarray, truth: np.ndarray) -> list[dict[str, Any]]:
    """Recall@10 of ``index`` at each search-time setting (efSearch for HNSW, nprobe for IVF)."""
    knob, values = ("efSearch", EF_SEARCH) if method == "hnsw" else ("nprobe", NPROBE)
    rows = []
    for value in values:
        if method == "hnsw":
            index.hnsw.efSearch = value
        else:
            index.nprobe = min(value, index.nlist)
        found = index.search(queries, K)[1]
        rows.append({"method": method, "knob": knob, "value": value, "recall": recall(found, truth)})
    return rows


def measure(encoder: TextEncoder, docs: np.ndarray, queries: np.ndarray) -> list[dict[str, Any]]:
    """Every head's rows; documents stored alike (dot and qnorm: raw) share their indexes."""
    heads, rows, built = every_head(encoder.head), [], {}
    for name in HEADS:
        head = heads[name]
        gq, gd = head.gammas()
        for layout, metric in LAYOUTS.items():
            if name == "cosine" and layout != "ip":
                continue  # unit documents: the reduction would add a zero coordinate
            side_d, side_q = stored(head, docs, queries, layout)
            truth = exact_top(side_d, side_q, metric)
            print(f"  {name} (gq {gq:.2f}, gd {gd:.2f}), {layout}", flush=True)
            for method in ("hnsw", "ivf"):
                key = (gd, layout, method)
                if key not in built:
                    built[key] = build(method, side_d, metric)
                index, described = built[key]
                for row in sweep(method, index, side_q, truth):
                    rows.append({"head": name, "gq": gq, "gd": gd, "layout": layout, **row, **described})
                    print(f"    {method} {row['knob']} {row['value']:>4}: recall@10 {row['recall']:.3f}", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_scale_arguments(parser, "runs/bench_ann_scale")
    args = parser.parse_args()
    encoder = scale_encoder(parser, args)
    print_header("HNSW and IVF recall@10 per head at scale: inner product, MIPS-to-L2 and the cosine control")
    functions, query_texts = corpus_and_queries(args.docs, args.queries)
    texts = [fn.code for fn in functions]
    docs, queries = encode_both(encoder, texts, query_texts, ROOT / args.cache_dir, args.batch_size)
    rows = measure(encoder, docs, queries)
    print(f"\n  load average at end (1 / 5 / 15 min): {load_average()}")
    corpus = {
        "source": "functions of the packages in site-packages (text_retrieval/data/bundled/extract.py)",
        "packages": sorted({fn.path.split("/")[0] for fn in functions}),
        "documents": len(texts),
        "queries": len(query_texts),
        "fingerprint": fingerprint(texts),
        "python": sys.version.split()[0],
    }
    label = model_label(args.export) if args.export else "all-MiniLM-L6-v2"
    figures = {"model": label, "corpus": corpus, "k": K, "rows": rows}
    write_record(ROOT / args.output, "ann_scale", args, figures, leave_out=("cache_dir", "export"))


if __name__ == "__main__":
    main()
