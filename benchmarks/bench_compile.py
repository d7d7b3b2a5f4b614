"""Would torch.compile (inductor, CPU) pay off? Eager vs compiled all-MiniLM-L6-v2, side by side.

Three workloads at clipmag's default precision (bf16 autocast on a CPU with native bf16, else
fp32): encoding one fixed-shape batch (forward, no grad, mean pooling), the best case for a
compiler; encoding a SciFact corpus as ``TextEncoder.encode`` does, every batch padded to its own
length, with the model compiled for dynamic shapes (the real case); and a training step (forward +
backward of the InfoNCE loss of a query and a document batch, fixed shapes). Compile time is
reported apart; the timed rounds alternate eager and compiled.
Exactness is the largest difference of the pooled embeddings (encode) and of the gradients
(training step) between the two. clipmag adopts compilation only at >= 1.1x and exact results.
``--output`` writes each workload's compile time, difference, seconds per call and speed-ups, with
the CPU and the code state, as JSON (rendered into docs/precision.md).

    python benchmarks/bench_compile.py [--rounds 4] [--encode-batch 32] [--encode-length 128] [--corpus-docs 512]
    python benchmarks/bench_compile.py --only corpus
    python benchmarks/bench_compile.py --output results/speed/compile.json
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from harness import (
    SCIFACT_CORPUS,
    code_at_start,
    default_model,
    default_precision,
    load_texts,
    print_header,
    ratio,
    rounds,
    spread,
    write_record,
)

from clipmag.runtime.precision import autocast, autocast_dtype
from clipmag.scoring.heads import build_head
from clipmag.scoring.losses import InfoNCE
from text_retrieval.model.encoder import TextEncoder
from text_retrieval.model.pooling import pool

CPU = torch.device("cpu")


def batch(encoder: TextEncoder, n: int, length: int, seed: int) -> dict[str, torch.Tensor]:
    """``n`` random token sequences of exactly ``length`` tokens (a full attention mask)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1000, encoder.tokenizer.vocab_size, (n, length), generator=g)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def cached_kernels() -> int:
    """How many files inductor's on-disk cache holds: a warm cache makes compiling far quicker."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    return sum(1 for path in Path(cache_dir()).rglob("*") if path.is_file())


def seconds_of(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def compare(
    name: str, eager: Callable[[], torch.Tensor], compiled: Callable[[], torch.Tensor], args: argparse.Namespace
) -> dict[str, Any]:
    """Compile (timed apart), check exactness, then time both in alternating rounds; return the
    workload's figures for the record."""
    reference = eager()
    compile_s = seconds_of(compiled)
    diff = float((compiled() - reference).abs().max())
    scale = float(reference.abs().max())
    print(f"\n{name}: compile {compile_s:.0f} s; max |compiled - eager| {diff:.2e} (largest value {scale:.2e})")
    times = rounds(
        {"eager": lambda: seconds_of(eager), "compiled": lambda: seconds_of(compiled)},
        args.rounds,
        lambda t: f"{t:.2f} s",
    )
    print(f"  {name}: seconds per call, eager {spread(times['eager'])}, compiled {spread(times['compiled'])}")
    speedup = ratio(times["eager"], times["compiled"])
    print(f"  {name}: speed-up compiled / eager, median of the per-round ratios (range): {spread(speedup)}")
    return {"compile_s": compile_s, "max_abs_diff": diff, "largest": scale, "seconds": times, "speedup": speedup}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--encode-batch", type=int, default=32)
    p.add_argument("--encode-length", type=int, default=128)
    p.add_argument("--train-batch", type=int, default=16)
    p.add_argument("--train-length", type=int, default=64)
    p.add_argument("--corpus-docs", type=int, default=512, help="SciFact documents of the corpus encode")
    p.add_argument("--only", choices=("batch", "corpus", "train"), default=None, help="run one workload")
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--output", type=Path, default=None, help="JSON file for the figures")
    args = p.parse_args()
    if args.output:
        code_at_start()  # before anything is measured or written
    torch.set_num_threads(args.threads)
    cache_files = cached_kernels()
    print(f"inductor's on-disk cache holds {cache_files} files at the start (0: every compile here is cold)")
    dtype = autocast_dtype("auto", CPU)
    print_header(f"torch.compile vs eager, all-MiniLM-L6-v2, clipmag's default precision here: {default_precision()}")
    encoder = TextEncoder.from_pretrained(default_model())
    model = encoder.model.eval()  # dropout off: both sides compute the same function
    model.pooler.requires_grad_(False)  # unused by mean pooling; as in training (no gradient either side)
    compiled_model = torch.compile(model)

    def embed(net: torch.nn.Module, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        with autocast(CPU, dtype):
            return pool(net(**inputs).last_hidden_state, inputs["attention_mask"], "mean")

    docs = batch(encoder, args.encode_batch, args.encode_length, 0)
    workloads: dict[str, dict[str, Any]] = {}
    if args.only in (None, "batch"):
        name = f"encode one {args.encode_batch} x {args.encode_length}-token batch"
        with torch.no_grad():
            workloads[name] = compare(name, lambda: embed(model, docs), lambda: embed(compiled_model, docs), args)
    if args.only in (None, "corpus"):
        texts = load_texts(SCIFACT_CORPUS, args.corpus_docs)
        dynamic = TextEncoder(
            torch.compile(model, dynamic=True), encoder.tokenizer, document_max_length=encoder.document_max_length
        )
        name = f"encode {len(texts)} SciFact docs (batches of 32 padded to their own length, dynamic shapes)"
        workloads[name] = compare(
            name,
            lambda: torch.from_numpy(encoder.encode(texts, "document", 32, show_progress=False)),
            lambda: torch.from_numpy(dynamic.encode(texts, "document", 32, show_progress=False)),
            args,
        )

    loss, head = InfoNCE(scale=20.0, direction="q2d"), build_head("cosine")
    queries = batch(encoder, args.train_batch, args.train_length, 1)
    positives = batch(encoder, args.train_batch, args.train_length, 2)

    def step(net: torch.nn.Module) -> torch.Tensor:
        model.zero_grad(set_to_none=True)
        loss(embed(net, queries), embed(net, positives), head)["loss"].backward()
        return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])

    if args.only in (None, "train"):
        name = f"training step, 2 x {args.train_batch} x {args.train_length} tokens"
        workloads[name] = compare(name, lambda: step(model), lambda: step(compiled_model), args)
    if args.output:
        figures = {"precision": default_precision(), "cache_files_at_start": cache_files, "workloads": workloads}
        write_record(args.output, "bench_compile", args, figures)


if __name__ == "__main__":
    main()
