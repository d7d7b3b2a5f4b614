"""Exact top-k search: ours vs a blocked torch matmul + top-k vs sentence-transformers' semantic_search.

Every side starts from the same raw document and query embeddings and a qnorm head (documents keep
their magnitude) and returns each query's top-k documents:

* ours: ``text_retrieval.retrieval.search.ExactIndex`` (head transform, then the exact backend chosen per case,
  timed on a slice in the first round) returning score and position arrays;
* blocked torch, the peer (what BEIR's exact search does): transform both sides, then
  ``torch.topk(q_block @ docs.T, k)`` for blocks of 256 queries;
* sentence-transformers' ``util.semantic_search`` with ``score_function=dot_score`` on the transformed
  vectors (its defaults: 100 queries x 500k documents per step, results as lists of dicts).

Cases: top-10 and top-1000 over 100k x 384 in memory with 1,000 queries, and over 1M x 384 stored
as a memory-mapped fp32 file with 100 queries (ours streams it under ``--memory-gb``). Rounds rotate
the order of the sides; medians of the per-round ratios are printed, with each side's peak resident
memory (the kernel's high-water mark, reset before each side). The last line is the ratio ours /
blocked torch at top-1000 on 100k x 384. ``--output`` writes every case's per-round seconds, peak
memory, agreement and ratios, with the CPU and the code state, as JSON.

    python benchmarks/bench_search.py                      # about 5 minutes on 2 busy cores
    python benchmarks/bench_search.py --skip-large --rounds 3
    python benchmarks/bench_search.py --output results/speed/search.json
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness import code_at_start, print_header, ratio, rounds, spread, write_record  # noqa: E402

from clipmag.scoring.heads import build_head  # noqa: E402
from text_retrieval.retrieval.index import RetrievalSettings, release_pages  # noqa: E402
from text_retrieval.retrieval.search import ExactIndex  # noqa: E402

HEAD = build_head("qnorm")
warnings.filterwarnings("ignore", "The given NumPy array is not writable")  # the peers read a memory map as is


def peak_rss_mb() -> float:
    """The process's resident-memory high-water mark (VmHWM) in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def reset_peak_rss() -> None:
    """Restart the high-water mark at the current resident size (Linux: ``clear_refs`` 5)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def corpus(n: int, dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, dim), dtype=np.float32) * rng.uniform(0.5, 2, (n, 1)).astype(np.float32)


def ours(docs: np.ndarray, queries: np.ndarray, k: int, memory_gb: float) -> Callable[[], np.ndarray]:
    def run() -> np.ndarray:
        return ExactIndex(docs, HEAD, RetrievalSettings(memory_gb=memory_gb)).search(queries, k)[1]

    return run


def blocked_torch(docs: np.ndarray, queries: np.ndarray, k: int) -> Callable[[], np.ndarray]:
    def run() -> np.ndarray:
        td = HEAD.transform_document(torch.from_numpy(np.asarray(docs)))
        tq = HEAD.transform_query(torch.from_numpy(queries))
        return torch.cat([torch.topk(tq[i : i + 256] @ td.T, k, dim=1).indices for i in range(0, len(tq), 256)]).numpy()

    return run


def semantic_search(docs: np.ndarray, queries: np.ndarray, k: int) -> Callable[[], np.ndarray]:
    from sentence_transformers import util

    def run() -> np.ndarray:
        td = HEAD.transform_document(torch.from_numpy(np.asarray(docs)))
        tq = HEAD.transform_query(torch.from_numpy(queries))
        hits = util.semantic_search(tq, td, top_k=k, score_function=util.dot_score)
        return np.array([[h["corpus_id"] for h in row] for row in hits])

    return run


def bench_case(
    label: str, docs: np.ndarray, queries: np.ndarray, k: int, n_rounds: int, memory_gb: float
) -> dict[str, Any]:
    """Print one case; return its figures for the record (ratios above 1: ours is faster)."""
    print(f"\n{label}: {len(queries)} queries x {len(docs)} docs (dim {docs.shape[1]}), top-{k}", flush=True)
    sides = {
        "ours": ours(docs, queries, k, memory_gb),
        "blocked torch": blocked_torch(docs, queries, k),
        "semantic_search": semantic_search(docs, queries, k),
    }
    peaks: dict[str, list[float]] = {name: [] for name in sides}

    def timed(name: str) -> Callable[[], tuple[float, np.ndarray]]:
        def run() -> tuple[float, np.ndarray]:
            release_pages(docs, 0, len(docs))  # a memory map's pages read by the previous side
            reset_peak_rss()
            start = time.perf_counter()
            found = sides[name]()
            seconds = time.perf_counter() - start
            peaks[name].append(peak_rss_mb())
            return seconds, found

        return run

    results = rounds({name: timed(name) for name in sides}, n_rounds, lambda r: f"{r[0]:8.2f} s")
    seconds = {name: [r[0] for r in runs] for name, runs in results.items()}
    found = {name: runs[-1][1] for name, runs in results.items()}
    agree = (found["ours"][:, :10] == found["blocked torch"][:, :10]).all(axis=1).mean()
    index = ExactIndex(docs, HEAD, RetrievalSettings(memory_gb=memory_gb))
    index.search(queries[:1], k)
    print(f"  ours: {index.described}")
    print(f"  identical top-10 (ours vs blocked torch) for {agree:.1%} of queries")
    for name in sides:
        print(f"  {name:<16} {statistics.median(seconds[name]):7.2f} s   peak RSS {max(peaks[name]):8.0f} MB")
    speed = {name: [1 / s for s in values] for name, values in seconds.items()}
    ratios = {f"ours / {peer}": ratio(speed["ours"], speed[peer]) for peer in ("blocked torch", "semantic_search")}
    for name, values in ratios.items():
        print(f"  ratio {name:<26}{spread(values)}")
    return {
        "case": label,
        "queries": len(queries),
        "docs": len(docs),
        "dim": int(docs.shape[1]),
        "k": k,
        "seconds": seconds,
        "peak_mb": {name: max(values) for name, values in peaks.items()},
        "identical_top10": float(agree),
        "ours": index.described,
        "ratios": ratios,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--large-docs", type=int, default=1_000_000)
    parser.add_argument("--large-queries", type=int, default=100)
    parser.add_argument("--memory-gb", type=float, default=0.5, help="ours: bound for the memory-mapped case")
    parser.add_argument("--skip-large", action="store_true")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--output", type=Path, default=None, help="JSON file for the figures")
    args = parser.parse_args()
    if args.output:
        code_at_start()  # before anything is measured or written
    torch.set_num_threads(args.threads)
    print_header("exact top-k search under a qnorm head: ours vs blocked torch vs semantic_search")
    docs, queries = corpus(args.docs, args.dim, 0), corpus(args.queries, args.dim, 1)
    cases = [bench_case("in memory", docs, queries, k, args.rounds, 4.0) for k in (10, 1000)]
    del docs
    if not args.skip_large:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "corpus.npy"
            mapped = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(args.large_docs, args.dim))
            for start in range(0, args.large_docs, 100_000):
                mapped[start : start + 100_000] = corpus(min(100_000, args.large_docs - start), args.dim, start)
            mapped.flush()
            del mapped
            large = np.load(path, mmap_mode="r")
            few = queries[: args.large_queries]
            for k in (10, 1000):
                cases.append(bench_case("memory-mapped", large, few, k, args.rounds, args.memory_gb))
    print(f"\nratio {statistics.median(cases[1]['ratios']['ours / blocked torch']):.2f}")
    if args.output:
        write_record(args.output, "bench_search", args, {"cases": cases})


if __name__ == "__main__":
    main()
