"""RAG evaluation: retrieve passages for each question with each model under its own head (or the
heads ``--norm`` names, and BM25), let a reader LM answer from the top k, and score retrieval
accuracy@k and the answers per retriever row, with the change against cosine.

Examples:
    python scripts/eval_rag.py --model all-MiniLM-L6-v2 --data bundled
    python scripts/eval_rag.py --data bundled --norm cosine dot qnorm dnorm --bm25 --reader none
    python scripts/eval_rag.py --data bundled --norm cosine qnorm --hybrid rrf minmax --reader none
    python scripts/eval_rag.py --config configs/rag/paper_nq.yaml --model runs/paper/text/e5/default/qnorm/seed0/export
    python scripts/eval_rag.py --compare runs/rag/cosine-model runs/rag/qnorm-model

Flags set the keys of ``text_retrieval/rag/config.py`` (``--norm``, ``--hybrid`` and ``--qa`` take one or more
values, ``--bm25`` and ``--quiet`` none); any other key is given as ``key=value``
(``reader.few_shot=0``). Metrics go to ``<output>/results.json`` (one retriever) or
``<output>/<row>/results.json`` and ``<output>/table.md`` (several). ``--compare DIR ...`` only
prints the table of existing result folders, each read at the top k it was run with.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from clipmag.config.command_line import parse_cli
from clipmag.config.entry import run_entry_point
from clipmag.errors import ConfigError
from clipmag.registry.evaluations import EvaluationResult
from clipmag.runtime.logs import setup_logging
from clipmag.storage.folder_lock import FolderLock
from text_retrieval.rag.config import RagConfig
from text_retrieval.rag.report import Row, comparison_table, read_row

__all__ = ["RagCommand", "parse_args", "main", "entry", "read_evaluation"]

# flag -> dotted key of RagCommand
RAG_SHORTHANDS = {
    "model": "retrieval.models",
    "norm": "head.name",
    "pooling": "retrieval.pooling",
    "max_length": "retrieval.max_length",
    "cache_dir": "retrieval.cache_dir",
    "precision": "retrieval.precision",
    "bm25": "retrieval.bm25",
    "hybrid": "retrieval.hybrid",
    "data": "data.source",
    "corpus": "data.corpus",
    "qa": "data.qa",
    "limit": "data.limit",
    "dpr_qa_dir": "data.dpr_qa_dir",
    "reader": "reader.name_or_path",
    "top_k": "reader.top_k",
    "batch_size": "reader.batch_size",
    "output": "output",
    "compare": "compare",
    "quiet": "quiet",
}


@dataclass
class RagCommand(RagConfig):
    """The command line: an evaluation's keys (``RagConfig``, which its results record) plus how to
    run it: ``quiet`` (warnings only, no progress bars) and ``compare`` (result folders to tabulate
    instead of evaluating)."""

    quiet: bool = False
    compare: list[str] = field(default_factory=list)

    def evaluation(self) -> RagConfig:
        """The evaluation's own keys, which its results record (every field of ``RagConfig``)."""
        return RagConfig(**{f.name: getattr(self, f.name) for f in dataclasses.fields(RagConfig)})


def parse_args(argv: Sequence[str]) -> RagCommand:
    """``[--config YAML] [--flag value ...] [key=value ...]`` -> a checked command."""
    cmd = parse_cli(RagCommand, argv, RAG_SHORTHANDS, description=__doc__)
    if cmd.reader.top_k > cmd.retrieval.depth:  # its accuracy column would be empty, its prompts short
        raise ConfigError(
            f"command line: reader.top_k (--top-k) {cmd.reader.top_k} is more than retrieval.depth "
            f"{cmd.retrieval.depth}, the passages retrieved per question: lower it or raise retrieval.depth"
        )
    return cmd


def main(argv: Sequence[str]) -> list[Row]:
    """Run the configured evaluation (or compare existing folders); print and return the rows."""
    cmd = parse_args(argv)
    setup_logging(level=logging.WARNING if cmd.quiet else logging.INFO)
    if cmd.compare:
        rows = [read_row(folder) for folder in cmd.compare]
        print(comparison_table(rows, rows[0].top_k))
        return rows
    cfg = cmd.evaluation()
    from text_retrieval.rag.pipeline import run_rag  # the reader and the encoders: torch, transformers

    with FolderLock(cfg.output, "RAG evaluation"):  # two into one folder would mix their rows
        rows = run_rag(cfg, show_progress=not cmd.quiet)
    print(comparison_table(rows, cfg.reader.top_k))
    return rows


def read_evaluation(folder: str | Path) -> EvaluationResult:
    """One retriever's results in a folder, for sweep reports (``clipmag.registry.evaluations``)."""
    row = read_row(folder)
    metrics = {
        qa: {key: float(value) for key, value in values.items() if key != "num_questions"}
        for qa, values in row.metrics.items()
    }
    return EvaluationResult(metrics, row.outcomes)


def entry() -> None:
    """Console-script entry: user errors end with one ``error:`` line and exit status 2."""
    run_entry_point(main)
