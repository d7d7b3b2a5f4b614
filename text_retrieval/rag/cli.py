"""RAG evaluation: retrieve with each model's head (and BM25), read the top k with an LM, score.

Examples:
    python scripts/eval_rag.py --model all-MiniLM-L6-v2 --data embedded
    python scripts/eval_rag.py --data embedded --norm cosine dot qnorm dnorm --bm25 --reader none
    python scripts/eval_rag.py --config configs/rag/paper_nq.yaml --model runs/paper/qnorm/export
    python scripts/eval_rag.py --compare runs/rag/cosine-model runs/rag/qnorm-model

Flags set the keys of ``text_retrieval/rag/config.py``; any other key is given as ``key=value``
(``reader.few_shot=0``). Metrics go to ``<output>/results.json`` (one retriever) or
``<output>/<row>/results.json`` and ``<output>/table.md`` (several).
"""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Sequence
from pathlib import Path

from clipmag.config import build_config, config_keys_text
from clipmag.entry import run_entry_point
from clipmag.evaluations import EvaluationResult
from clipmag.heads import HEAD_NAMES
from clipmag.run_logging import setup_logging
from text_retrieval.model.pooling import POOLINGS
from text_retrieval.rag.config import RagConfig
from text_retrieval.rag.pipeline import run_rag
from text_retrieval.rag.report import Row, comparison_table, read_row

__all__ = ["main", "entry", "read_evaluation"]

# flag -> dotted config key; nargs="+" flags become YAML lists
_FLAGS = {
    "model": "retrieval.models",
    "norm": "retrieval.norms",
    "pooling": "retrieval.pooling",
    "max_length": "retrieval.max_length",
    "cache_dir": "retrieval.cache_dir",
    "corpus": "data.corpus",
    "qa": "data.qa",
    "limit": "data.limit",
    "dpr_qa_dir": "data.dpr_qa_dir",
    "reader": "reader.name_or_path",
    "top_k": "reader.top_k",
    "batch_size": "reader.batch_size",
    "output": "output",
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, epilog=config_keys_text(RagConfig), formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", default=None, help="YAML file of RagConfig keys (e.g. configs/rag/paper_nq.yaml)")
    parser.add_argument("--model", nargs="+", help="retriever(s): HF name or folder, or a clipmag export")
    parser.add_argument("--norm", nargs="+", choices=(*HEAD_NAMES, "model"), help="head(s) (default: the model's)")
    parser.add_argument("--pooling", choices=POOLINGS, help="retriever pooling (default: the model's)")
    parser.add_argument("--max-length", type=int, help="retriever max tokens, both sides")
    parser.add_argument("--cache-dir", help="raw passage embeddings cache")
    parser.add_argument("--bm25", action="store_true", help="add the BM25 row")
    parser.add_argument("--data", choices=("embedded", "files"), help="embedded: build and use the embedded set")
    parser.add_argument("--corpus", help="passages: DPR psgs_w100.tsv layout, BEIR corpus.jsonl, or a folder")
    parser.add_argument("--qa", nargs="+", help="QA file(s): DPR tsv (question<TAB>answer list) or JSON lines")
    parser.add_argument("--limit", type=int, help="first N questions of each QA file")
    parser.add_argument("--dpr-qa-dir", help="DPR QA test files for the embedded builder (default: from PyPI)")
    parser.add_argument("--reader", help="seq2seq/causal HF model, .gguf file, 'smollm2' or 'none'")
    parser.add_argument("--top-k", type=int, help="passages in the prompt (default 5)")
    parser.add_argument("--batch-size", type=int, help="reader batch size")
    parser.add_argument("--output", help="results folder (default runs/rag)")
    parser.add_argument("--compare", nargs="+", metavar="DIR", help="only print the table of existing result folders")
    parser.add_argument("--quiet", action="store_true", help="no progress bars, warnings only")
    parser.add_argument("overrides", nargs="*", help="key=value settings, e.g. reader.few_shot=0")
    return parser


def _overrides(args: argparse.Namespace) -> list[str]:
    """The flags given, as ``key=value`` tokens for ``build_config`` (lists written as YAML)."""
    tokens = []
    for flag, key in _FLAGS.items():
        value = getattr(args, flag)
        if value is None:
            continue
        if isinstance(value, list):
            value = json.dumps(value)  # a JSON list is a YAML list
        tokens.append(f"{key}={value}")
    if args.bm25:
        tokens.append("retrieval.bm25=true")
    if args.data:
        tokens.append(f"data.source={args.data}")
    return [*tokens, *args.overrides]


def main(argv: Sequence[str] | None = None) -> list[Row]:
    """Run the configured evaluation (or compare existing folders); print and return the rows."""
    args = _parser().parse_intermixed_args(argv)
    setup_logging(level=logging.WARNING if args.quiet else logging.INFO)
    if args.compare:
        rows = [read_row(folder, args.top_k) for folder in args.compare]
        print(comparison_table(rows, args.top_k or 5))
        return rows
    cfg = build_config(RagConfig, args.config, _overrides(args))
    rows = run_rag(cfg, show_progress=not args.quiet)
    print(comparison_table(rows, cfg.reader.top_k))
    return rows


def read_evaluation(folder: str | Path) -> EvaluationResult:
    """One retriever's results in a folder, for sweep reports (``clipmag.evaluations``)."""
    row = read_row(folder)
    metrics = {
        qa: {key: float(value) for key, value in values.items() if key != "num_questions"}
        for qa, values in row.metrics.items()
    }
    return EvaluationResult(metrics, row.outcomes)


def entry() -> None:
    """Console-script entry: user errors end with one ``error:`` line and exit status 2."""
    run_entry_point(main)
