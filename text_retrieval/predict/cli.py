"""Command line of the qnorm/dnorm predictors (``scripts/predict_norm.py``).

Kept apart from :mod:`text_retrieval.predict.predictors` so the science imports without argparse, the data
loaders or the packaged-model lookup, and so the tool has an importable ``main(argv)``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from clipmag.entry import run_entry_point
from text_retrieval.config import EmbeddedDataConfig
from text_retrieval.data.beir import is_beir_folder
from text_retrieval.data.pairs import pairs_from_beir, pairs_from_embedded, pairs_from_jsonl, shuffled
from text_retrieval.data.shards import TextShardStream
from text_retrieval.model.encoder import POOLINGS, TextEncoder
from text_retrieval.model.packaged import resolve_model_name
from text_retrieval.predict.predictors import DCV_THRESHOLD, predict_norm

__all__ = ["main", "entry", "load_probe_pairs", "summary_lines"]

EMBEDDED_ROOT = EmbeddedDataConfig().root  # where the trainer builds the embedded set


def load_probe_pairs(spec: str, n: int, seed: int = 0, split: str = "train") -> tuple[list[str], list[str]]:
    """n seeded (query, positive) pairs from ``embedded``, a shard folder, a BEIR folder or a jsonl file."""
    path = Path(spec)
    if spec == "embedded":
        samples = shuffled(pairs_from_embedded(EMBEDDED_ROOT), seed)
    elif path.is_dir() and is_beir_folder(path):
        samples = shuffled(pairs_from_beir(path, split), seed)
    elif path.is_dir():
        stream = TextShardStream(path, batch_size=min(n, TextShardStream(path, 1).num_samples), seed=seed)
        batch = next(stream.batches(0))
        samples = [{"query": q, "positive": p} for q, p in zip(batch["query"], batch["positive"])]
    elif path.is_file():
        samples = shuffled(pairs_from_jsonl(path), seed)
    else:
        raise FileNotFoundError(f"--data: {spec} is neither 'embedded', a folder (shards or BEIR) nor a jsonl file")
    samples = samples[:n]
    if len(samples) < 2:
        raise ValueError(f"--data {spec}: need at least 2 pairs, found {len(samples)}")
    return [s["query"] for s in samples], [s["positive"] for s in samples]


def summary_lines(result: dict[str, Any]) -> list[str]:
    """A plain-text summary of a :func:`~text_retrieval.predict.predictors.predict_norm` result and its settings."""
    s, c, f = result["settings"], result["query_cv_ratio"], result["fisher"]
    return [
        f"model {s.get('model')} on {s.get('data')}: {s['n_pairs']} pairs, max length {s['query_max_length']}, "
        f"seed {s['seed']}",
        f"query-norm CV ratio (paper v1, {s['probe_steps']}-step probe, exploratory): "
        f"dCV = {c['cv_after_dnorm']:.4f} / {c['cv_after_dot']:.4f}"
        f" = {c['dcv']:.3f} (pretrained CV {c['cv_pretrained']:.4f}; threshold {c['threshold']:.2f}) -> {c['verdict']}"
        f"  [{c['seconds']:.1f} s]",
        f"scale-free log-magnitude Fisher (ours): kappa_query = {f['kappa_query']:.4g}"
        f" (|rho| {f['abs_rho_query']:.4f}), kappa_document = {f['kappa_document']:.4g}"
        f" (|rho| {f['abs_rho_document']:.4f}) -> {f['verdict']}  [{f['seconds']:.1f} s]",
        "the probe is exploratory (its threshold comes from the paper's fine-tuned ranges, uncalibrated for a short"
        " probe); the Fisher rule is our own definition - check both against a head sweep's winner",
    ]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="predict_norm.py", description="Predict whether qnorm or dnorm suits a pretrained encoder."
    )
    parser.add_argument("--model", required=True, help="HF folder / hub name, or all-MiniLM-L6-v2 (packaged)")
    parser.add_argument(
        "--data", required=True, help="'embedded', a WebDataset shard folder, a BEIR folder or a pairs jsonl"
    )
    parser.add_argument("--split", default="train", help="qrels split of a BEIR folder (default: train)")
    parser.add_argument("--n-pairs", type=int, default=200)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--pooling", default=None, choices=POOLINGS, help="pooling (default: the model's own)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--probe-steps", type=int, default=4)
    parser.add_argument("--probe-lr", type=float, default=1e-4)
    parser.add_argument("--probe-batch-size", type=int, default=16)
    parser.add_argument("--fisher-batch-size", type=int, default=32)
    parser.add_argument("--dcv-threshold", type=float, default=DCV_THRESHOLD)
    parser.add_argument("--output", default=None, help="write the JSON here instead of printing it")
    return parser


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """``predict_norm.py --model PATH --data DIR``: both predictors, JSON to --output (or stdout)."""
    args = _parser().parse_args(argv)
    if args.n_pairs < 2 or args.max_length < 2:
        raise ValueError(f"--n-pairs and --max-length must be >= 2, got {args.n_pairs}, {args.max_length}")

    queries, documents = load_probe_pairs(args.data, args.n_pairs, args.seed, args.split)
    encoder = TextEncoder.from_pretrained(
        resolve_model_name(args.model), pooling=args.pooling, max_length=args.max_length
    )
    start = time.perf_counter()
    result = predict_norm(
        encoder,
        queries,
        documents,
        seed=args.seed,
        probe_steps=args.probe_steps,
        probe_lr=args.probe_lr,
        probe_batch_size=args.probe_batch_size,
        fisher_batch_size=args.fisher_batch_size,
        dcv_threshold=args.dcv_threshold,
    )
    result["settings"] = {
        "model": args.model,
        "data": args.data,
        **result["settings"],
        "seconds": time.perf_counter() - start,
        "torch_threads": torch.get_num_threads(),
    }
    text = json.dumps(result, indent=2)
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(text + "\n", encoding="utf-8")
    else:
        print(text)  # stdout stays parseable JSON; the summary then goes to stderr
    print("\n".join(summary_lines(result)), file=sys.stderr if not args.output else sys.stdout)
    return result


def entry() -> None:
    """Console-script entry: user errors end with one ``error:`` line and exit status 2."""
    run_entry_point(main)
