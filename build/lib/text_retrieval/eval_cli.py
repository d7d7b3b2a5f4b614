"""Evaluate text encoders on BEIR, BRIGHT and STS data with each model's own similarity head.

Example:
    python scripts/eval_text.py --model sentence-transformers/all-MiniLM-L6-v2 \
        --data ../shared/data/beir/scifact ../shared/data/sts/stsbenchmark --norm cosine --output runs/eval
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from typing import Any

from clipmag.entry import run_entry_point
from clipmag.heads import HEAD_NAMES
from clipmag.run_logging import setup_logging
from text_retrieval.encoder import POOLINGS
from text_retrieval.evaluate import evaluate_paths

__all__ = ["main", "entry"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", nargs="+", required=True, help="Hugging Face folder or name, or a clipmag export")
    parser.add_argument("--data", nargs="+", required=True, help="BEIR folder, BRIGHT folder, or STS folder/file")
    parser.add_argument("--norm", choices=HEAD_NAMES, default=None,
                        help="similarity head (default: the model's, else cosine)")
    parser.add_argument("--pooling", choices=POOLINGS, default=None, help="pooling (default: the model's, else mean)")
    parser.add_argument("--split", default="test")
    parser.add_argument("--output", default="runs/eval_text")
    parser.add_argument("--top-k", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-length", type=int, default=None, help="max tokens, both sides (default: the model's)")
    parser.add_argument("--cache-dir", default=None, help="cache raw corpus embeddings here (default: no cache)")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    return parser


def main(argv: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Every model on every data set; one JSON per pair under --output, the records returned."""
    args = _parser().parse_args(argv)
    setup_logging(level=logging.WARNING if args.quiet else logging.INFO)
    return evaluate_paths(args.model, args.data, args.output, norm=args.norm, pooling=args.pooling, split=args.split,
                          top_k=args.top_k, batch_size=args.batch_size, max_length=args.max_length,
                          cache_dir=args.cache_dir, show_progress=not args.quiet)


def entry() -> None:
    """Console-script entry: user errors end with one ``error:`` line and exit status 2."""
    run_entry_point(main)
