"""Evaluate text encoders on BEIR, BRIGHT and STS data with each model's own similarity head.

Example:
    python scripts/eval_text.py --model sentence-transformers/all-MiniLM-L6-v2 \
        --data ../shared/data/beir/scifact ../shared/data/sts/stsbenchmark --norm cosine --output runs/eval
"""

from __future__ import annotations

import argparse
import logging

from clipmag.heads import HEAD_NAMES
from text_retrieval.encoder import POOLINGS
from text_retrieval.evaluate import evaluate_paths


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", nargs="+", required=True, help="Hugging Face folder or name, or a clipmag export")
    parser.add_argument("--data", nargs="+", required=True, help="BEIR folder, BRIGHT folder, or STS folder/file")
    parser.add_argument("--norm", choices=HEAD_NAMES, default=None, help="similarity head (default: the model's, else cosine)")
    parser.add_argument("--pooling", choices=POOLINGS, default=None, help="pooling (default: the model's, else mean)")
    parser.add_argument("--split", default="test")
    parser.add_argument("--output", default="runs/eval_text")
    parser.add_argument("--top-k", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-length", type=int, default=None, help="max tokens, both sides (default: the model's)")
    parser.add_argument("--cache-dir", default=None, help="cache raw corpus embeddings here (default: no cache)")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)
    logger = logging.getLogger("clipmag")
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING if args.quiet else logging.INFO)
    evaluate_paths(args.model, args.data, args.output, norm=args.norm, pooling=args.pooling, split=args.split, top_k=args.top_k,
                   batch_size=args.batch_size, max_length=args.max_length, cache_dir=args.cache_dir, show_progress=not args.quiet)


if __name__ == "__main__":
    main()
