"""Exact large batches on small memory: clipmag's gradient caching vs sentence-transformers'
``CachedMultipleNegativesRankingLoss``, side by side, ratio printed.

Both sides train the same all-MiniLM-L6-v2 weights on the same (docstring, code) pairs from the
Python standard library, one global batch of ``--batch-size`` pairs per step (in-batch negatives
over the whole batch), InfoNCE q2d at scale 20 with cosine similarity, AdamW with the same
settings, fp32, max length ``--max-length`` on both sides:

* ours: ``clipmag.train.grad_cache.cached_backward`` on the text trainer's ``BiEncoder`` with
  ``train.chunk_size`` = the chunk size, then the optimizer step;
* theirs: ``CachedMultipleNegativesRankingLoss(mini_batch_size=chunk)`` forward + backward, then
  the optimizer step.

Every (side, chunk size) runs in its own subprocess, so peak memory is that configuration's own:
the resident set's high-water mark during the timed steps minus the resident set before the first
step (model, tokenizer and data loaded). Samples/s are over ``--steps`` steps after one warm-up
step. Configurations alternate ours / theirs so drift in background load hits both alike; the
machine's load average is printed because other work on the CPU slows both sides. ``--output``
writes each configuration's samples/s, peak memory and step times, the ratios, the CPU and the
code state as JSON.

    python benchmarks/bench_chunked.py [--batch-size 256] [--chunks 256 64 16] [--steps 2] [--rounds 2] \
        [--max-length 64]
    python benchmarks/bench_chunked.py --output results/speed/chunked.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _pairs(n: int) -> tuple[list[str], list[str]]:
    import logging as stdlib_logging

    from text_retrieval.data.bundled.extract import extract_functions

    functions = [f for f in extract_functions(Path(stdlib_logging.__file__).parents[1]) if f.summary]
    if len(functions) < n:
        raise SystemExit(f"only {len(functions)} stdlib functions with docstrings; ask for fewer pairs")
    return [f.summary for f in functions[:n]], [f.code for f in functions[:n]]


def _ours(args: argparse.Namespace, queries: list[str], docs: list[str]) -> list[float]:
    import contextlib

    import torch

    from clipmag.scoring.heads import build_head
    from clipmag.scoring.losses import InfoNCE
    from clipmag.train.grad_cache import cached_backward
    from text_retrieval.model.biencoder import BiEncoder
    from text_retrieval.model.encoder import TextEncoder

    head = build_head("cosine")
    encoder = TextEncoder.from_pretrained("all-MiniLM-L6-v2", head=head, max_length=args.max_length)
    model = BiEncoder(encoder, InfoNCE(scale=20.0), "retrieval", 0, 1.0).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-6, betas=(0.9, 0.98), weight_decay=0.01)
    times = []
    for step in range(args.steps + 1):
        rows = slice(step * args.batch_size, (step + 1) * args.batch_size)
        batch = {"query": queries[rows], "positive": docs[rows]}
        start = time.perf_counter()
        cached_backward(
            model, batch, args.chunk, lambda loss: loss.backward(), torch.device("cpu"), contextlib.nullcontext
        )
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - start)
    return times


def _theirs(args: argparse.Namespace, queries: list[str], docs: list[str]) -> list[float]:
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.losses import CachedMultipleNegativesRankingLoss

    from text_retrieval.model.packaged import resolve_model_name

    model = SentenceTransformer(resolve_model_name("all-MiniLM-L6-v2"), device="cpu")
    model.max_seq_length = args.max_length
    model.train()
    loss = CachedMultipleNegativesRankingLoss(model, scale=20.0, mini_batch_size=args.chunk)
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-6, betas=(0.9, 0.98), weight_decay=0.01)
    times = []
    for step in range(args.steps + 1):
        rows = slice(step * args.batch_size, (step + 1) * args.batch_size)
        start = time.perf_counter()
        features = [model.tokenize(queries[rows]), model.tokenize(docs[rows])]
        loss(features, None).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - start)
    return times


def child(args: argparse.Namespace) -> None:
    """One configuration in this process; prints one JSON line."""
    import torch

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    queries, docs = _pairs(args.batch_size * (args.steps + 1))
    run = _ours if args.side == "ours" else _theirs
    baseline = _rss_mb()
    times = run(args, queries, docs)
    timed = sum(times[1:])
    print(
        json.dumps(
            {
                "side": args.side,
                "chunk": args.chunk,
                "samples_per_s": args.batch_size * args.steps / timed,
                "peak_mb": _peak_mb() - baseline,
                "step_s": times,
            }
        ),
        flush=True,
    )


def _run_child(args: argparse.Namespace, side: str, chunk: int) -> dict:
    cmd = [sys.executable, __file__, "--child", side, "--chunk", str(chunk)]
    for flag in ("batch_size", "steps", "max_length", "threads"):
        cmd += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{side} chunk {chunk} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def parent(args: argparse.Namespace) -> None:
    from harness import ratio, spread, write_record  # here, not at the top: a child's baseline memory stays without it

    print(
        f"global batch {args.batch_size}, max length {args.max_length}, {args.steps} timed steps after 1 warm-up, "
        f"fp32, {args.threads} threads, {args.rounds} rounds, load average {os.getloadavg()[0]:.2f}"
    )
    keys = ("samples_per_s", "peak_mb", "step_s")
    measured = {str(c): {side: {k: [] for k in keys} for side in ("ours", "theirs")} for c in args.chunks}
    for r in range(args.rounds):
        for i, chunk in enumerate(args.chunks):
            for side in ("ours", "theirs") if (i + r) % 2 == 0 else ("theirs", "ours"):
                result = _run_child(args, side, chunk)
                for k in keys:
                    measured[str(chunk)][side][k].append(result[k])
                print(f"  round {r + 1} chunk {chunk:>4} {side:<7}{result['samples_per_s']:7.2f} samples/s", flush=True)
    print(f"\n{'chunk':>6}{'ours sps':>10}{'ST sps':>9}{'ratio, median (range)':>24}{'ours MB':>9}{'ST MB':>8}")
    ratios = {}
    for chunk, sides in measured.items():
        ours, theirs = sides["ours"], sides["theirs"]
        ratios[chunk] = {
            "samples_per_s ours/ST": ratio(ours["samples_per_s"], theirs["samples_per_s"]),
            "peak_mb ours/ST": [a / max(b, 1.0) for a, b in zip(ours["peak_mb"], theirs["peak_mb"])],
        }
        print(
            f"{chunk:>6}{statistics.median(ours['samples_per_s']):>10.2f}{statistics.median(theirs['samples_per_s']):>9.2f}"
            f"{spread(ratios[chunk]['samples_per_s ours/ST']):>24}"
            f"{max(ours['peak_mb']):>9.0f}{max(theirs['peak_mb']):>8.0f}"
        )
    print(f"load average at the end {os.getloadavg()[0]:.2f}")
    if args.output:
        write_record(
            args.output, "bench_chunked", args, {"chunks": measured, "ratios": ratios}, leave_out=("child", "chunk")
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--chunks", type=int, nargs="+", default=[256, 64, 16])
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2, help="rounds; which side goes first alternates")
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--output", type=Path, default=None, help="JSON file for the figures")
    parser.add_argument("--child", choices=("ours", "theirs"), default=None, help=argparse.SUPPRESS)
    parser.add_argument("--chunk", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.output and not args.child:
        from harness import code_at_start  # the parent only (a child measures its memory)

        code_at_start()  # before anything is measured or written
    if args.child:
        args.side = args.child
        child(args)
    else:
        parent(args)


if __name__ == "__main__":
    main()
