"""Predict whether ``qnorm`` or ``dnorm`` suits a pretrained text encoder, before fine-tuning it.
Two predictors read ``n_pairs`` (query, positive) pairs of the data: the paper's query-norm CV
ratio after two short probes (exploratory) and our scale-free log-magnitude Fisher rule
(:mod:`text_retrieval.predict.predictors` defines both). Prints the result as JSON, or writes it to
``--output``, with a summary of both verdicts; about a minute for MiniLM on 200 pairs on a CPU.

Examples:
    clipmag-predict-norm --model all-MiniLM-L6-v2 --data bundled
    clipmag-predict-norm --model facebook/contriever --data data/beir/scifact --output runs/predict/contriever.json

Every key is also a ``--flag`` (``--n-pairs 128``). The command line is kept apart from the
predictors so the science imports without it, the data loaders or the packaged-model lookup.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from clipmag.config.command_line import field_flags, parse_cli
from clipmag.config.entry import run_entry_point
from text_retrieval.config import BundledDataConfig
from text_retrieval.predict.config import PredictConfig

__all__ = ["parse_args", "main", "entry", "load_probe_pairs", "summary_lines"]

BUNDLED_ROOT = BundledDataConfig().root  # where the trainer builds the bundled set


def load_probe_pairs(spec: str, n: int, seed: int = 0, split: str = "train") -> tuple[list[str], list[str]]:
    """n seeded (query, positive) pairs from ``bundled``, a shard folder, a BEIR folder or a jsonl file."""
    from text_retrieval.data.bundled.build import pairs_from_bundled  # the readers load torch: not for --help
    from text_retrieval.data.loaders.beir import is_beir_folder
    from text_retrieval.data.training.pairs import pairs_from_beir, pairs_from_jsonl, shuffled
    from text_retrieval.data.training.shards import TextShardStream

    path = Path(spec)
    if spec == "bundled":
        samples = shuffled(pairs_from_bundled(BUNDLED_ROOT), seed)
    elif path.is_dir() and is_beir_folder(path):
        samples = shuffled(pairs_from_beir(path, split), seed)
    elif path.is_dir():
        stream = TextShardStream(path, batch_size=min(n, TextShardStream(path, 1).num_samples), seed=seed)
        batch = next(stream.batches(0))
        samples = [{"query": q, "positive": p} for q, p in zip(batch["query"], batch["positive"])]
    elif path.is_file():
        samples = shuffled(pairs_from_jsonl(path), seed)
    else:
        raise FileNotFoundError(f"--data: {spec} is neither 'bundled', a folder (shards or BEIR) nor a jsonl file")
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


# Every key is also a flag: --n-pairs 128 sets n_pairs (as the trainers' --norm sets head.name).
PREDICT_SHORTHANDS = field_flags(PredictConfig)


def parse_args(argv: Sequence[str]) -> PredictConfig:
    """``[--config YAML] [--flag value ...] [key=value ...]`` -> checked settings."""
    return parse_cli(PredictConfig, argv, PREDICT_SHORTHANDS, description=__doc__)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """``predict_norm.py --model PATH --data DIR``: both predictors, JSON to --output (or stdout)."""
    args = parse_args(list(sys.argv[1:] if argv is None else argv))  # --help ends here, before torch loads
    import torch

    from clipmag.results.provenance import provenance
    from clipmag.scoring.heads import build_head
    from text_retrieval.model.encoder import TextEncoder
    from text_retrieval.model.packaged import resolve_model_name
    from text_retrieval.predict.predictors import predict_norm

    queries, documents = load_probe_pairs(args.data, args.n_pairs, args.seed, args.split)
    encoder = TextEncoder.from_pretrained(  # the predictors score with their own dot head, whatever the model's
        resolve_model_name(args.model), head=build_head("dot"), pooling=args.pooling, max_length=args.max_length
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
    result["provenance"] = provenance(result["settings"])
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
