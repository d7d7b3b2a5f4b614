"""Evaluate text encoders on BEIR, BRIGHT and STS data with each model's own similarity head.

Examples:
    python scripts/eval_text.py --model sentence-transformers/all-MiniLM-L6-v2 \\
        --data ../shared/data/beir/scifact ../shared/data/sts/stsbenchmark --norm cosine --output runs/eval
    python scripts/eval_text.py --model facebook/contriever --data data/bright                   # BRIGHT
    python scripts/eval_text.py --model facebook/contriever --data data/bright --long-documents  # long setting
    python scripts/eval_text.py --model facebook/contriever --data data/bright --reasoning gpt4_reason
    torchrun --nproc_per_node=8 scripts/eval_text.py --model facebook/contriever --data data/beir/msmarco \\
        --split dev --cache-dir cache/emb                                   # 8 processes share the corpus

Max lengths are evaluation-time settings: each side gets the model's own limit (its
sentence-transformers max_seq_length, else its tokenizer's) capped by --max-length-cap, unless set.
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Sequence
from typing import Any

from clipmag.entry import run_entry_point
from clipmag.heads import HEAD_NAMES
from clipmag.run_logging import setup_logging
from text_retrieval.data import EvalSettings
from text_retrieval.data.bright import REASONING_CONFIGS
from text_retrieval.data.settings import DEFAULT_MAX_LENGTH_CAP
from text_retrieval.evaluation.evaluate import evaluate_paths
from text_retrieval.model.pooling import POOLINGS
from text_retrieval.retrieval.corpus_cache import shared_encoding
from text_retrieval.retrieval.index import BACKENDS, CACHE_DTYPES, METHODS, RetrievalSettings

__all__ = ["main", "entry"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", nargs="+", required=True, help="Hugging Face folder or name, or a clipmag export")
    parser.add_argument(
        "--data", nargs="+", required=True, help="BEIR folder, BRIGHT folder or root, BRIGHT settings .yaml, or STS"
    )
    parser.add_argument(
        "--norm", choices=HEAD_NAMES, default=None, help="similarity head (default: the model's, else cosine)"
    )
    parser.add_argument("--pooling", choices=POOLINGS, default=None, help="pooling (default: the model's, else mean)")
    parser.add_argument("--split", default="test")
    parser.add_argument("--output", default="runs/eval_text")
    parser.add_argument("--top-k", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--cache-dir", default=None, help="cache raw corpus embeddings here (default: no cache)")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    bright = parser.add_argument_group("BRIGHT settings")
    bright.add_argument(
        "--long-documents", action="store_true", help="long documents, scored on gold_ids_long; adds Recall@1"
    )
    bright.add_argument("--reasoning", choices=REASONING_CONFIGS, default=None, help="reasoning-augmented queries")
    bright.add_argument(
        "--strict", action="store_true", help="gold ids missing from the corpus are an error (default: kept, counted)"
    )
    encoding = parser.add_argument_group("evaluation-time encoding")
    encoding.add_argument("--max-length", type=int, default=None, help="max tokens, both sides")
    encoding.add_argument("--query-max-length", type=int, default=None)
    encoding.add_argument("--document-max-length", type=int, default=None)
    encoding.add_argument(
        "--max-length-cap", type=int, default=DEFAULT_MAX_LENGTH_CAP, help="cap on the model's own limit (%(default)s)"
    )
    encoding.add_argument("--query-prefix", default=None, help="template; {task} = BRIGHT task or dataset name")
    encoding.add_argument("--document-prefix", default=None, help="template (default: the model's own prefixes)")
    scale = parser.add_argument_group("corpus scale (torchrun --nproc_per_node=N shares the corpus encoding)")
    scale.add_argument("--search", choices=METHODS, default="exact", help="approximate: recall@10 vs exact reported")
    scale.add_argument("--search-backend", choices=BACKENDS, default="auto", help="exact backend (auto: timed)")
    scale.add_argument("--search-memory-gb", type=float, default=4.0, help="larger corpora are searched in chunks")
    scale.add_argument("--cache-dtype", choices=tuple(CACHE_DTYPES), default="fp32", help="corpus cache storage")
    scale.add_argument("--chunk-size", type=int, default=10_000, help="corpus rows per encoding chunk (resume unit)")
    return parser


def main(argv: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Every model on every data set; one JSON per pair under --output, the records returned."""
    args = _parser().parse_args(argv)
    setup_logging(rank=int(os.environ.get("RANK", "0")), level=logging.WARNING if args.quiet else logging.INFO)
    settings = EvalSettings(
        long_documents=args.long_documents,
        reasoning=args.reasoning,
        strict=True if args.strict else None,
        query_prefix=args.query_prefix,
        document_prefix=args.document_prefix,
        query_max_length=args.query_max_length or args.max_length,
        document_max_length=args.document_max_length or args.max_length,
        max_length_cap=args.max_length_cap,
    )
    with shared_encoding(args.output, args.cache_dir) as (cache_dir, distributed):
        retrieval = RetrievalSettings(
            args.chunk_size, args.cache_dtype, distributed, args.search, args.search_backend, args.search_memory_gb
        )
        return evaluate_paths(
            args.model,
            args.data,
            args.output,
            norm=args.norm,
            pooling=args.pooling,
            split=args.split,
            top_k=args.top_k,
            batch_size=args.batch_size,
            cache_dir=cache_dir,
            show_progress=not args.quiet,
            settings=settings,
            retrieval=retrieval,
        )


def entry() -> None:
    """Console-script entry: user errors end with one ``error:`` line and exit status 2."""
    run_entry_point(main)
