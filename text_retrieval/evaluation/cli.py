"""Evaluate text encoders on BEIR, BRIGHT and STS data with each model's own similarity head (or the
head ``--norm`` names): every model on every data set, one JSON record per pair under ``--output``
with nDCG, recall and MRR (Spearman for STS), the head record and the norm statistics.

Examples:
    python scripts/eval_text.py --model sentence-transformers/all-MiniLM-L6-v2 \\
        --data data/beir/scifact data/sts/stsbenchmark --norm cosine --output runs/eval
    python scripts/eval_text.py --model facebook/contriever --data data/bright                   # BRIGHT
    python scripts/eval_text.py --model facebook/contriever --data data/bright --long-documents  # long setting
    python scripts/eval_text.py --model facebook/contriever --data data/bright --reasoning gpt4_reason
    torchrun --nproc_per_node=8 scripts/eval_text.py --model facebook/contriever --data data/beir/msmarco \\
        --split dev --cache-dir cache/emb                                   # 8 processes share the corpus

Every top-level key of ``EvalTextConfig`` is a flag (``--top-k 100``), its sections' keys have
flags of their own (``--long-documents``, ``--search hnsw``), and any key is a ``key=value`` token
(``retrieval.memory_gb=8``); ``--model`` and ``--data`` take one or more values. Max lengths: a
side without --query-max-length / --document-max-length (--max-length for both) gets, for a
clipmag export, the inference length its head record carries (the length its run tested at, which
sentence-transformers and MTEB use too), and for any other model its own limit (its
sentence-transformers max_seq_length, else its tokenizer's); both capped by --max-length-cap.
--precision: auto (bf16 where the hardware computes it natively), fp32, bf16 or fp16, as for the trainers.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from clipmag.config.checks import PositiveInt
from clipmag.config.command_line import field_flags, parse_cli
from clipmag.config.entry import run_entry_point
from clipmag.errors import ConfigError
from clipmag.runtime.logs import setup_logging
from clipmag.runtime.precision_setting import PRECISIONS
from clipmag.scoring.head_config import OWN_HEAD_RENAME, HeadChoice
from clipmag.storage.folder_lock import FolderLock
from text_retrieval.config import PoolingName
from text_retrieval.data.loaders import EvalSettings
from text_retrieval.retrieval.index import RetrievalSettings

__all__ = ["EvalTextConfig", "FLAGS", "parse_args", "main", "entry"]


@dataclass
class EvalTextConfig:
    """One evaluation: every model on every data set.

    ``model``: Hugging Face folders or names, or clipmag exports; ``data``: BEIR folders, BRIGHT
    folders or roots, BRIGHT settings files (``configs/eval/*.yaml``) or STS files. ``head.name``
    (``--norm``) and ``pooling`` default to each model's own (its head record, else what its sentence-transformers
    config computes: ``text_retrieval/model/st_config.py``), else cosine and mean for a plain HF model.
    ``encoding`` (:class:`text_retrieval.data.loaders.eval_settings.EvalSettings`): BRIGHT's
    ``long_documents`` scores whole pages against ``gold_ids_long`` (adds Recall@1), ``reasoning``
    picks reasoning-augmented queries, ``strict`` makes gold ids missing from the corpus an error
    (default: kept and counted); max lengths (``max_length`` sets both sides) and prefixes, templates
    where ``{task}`` is the BRIGHT task or dataset name. ``retrieval``
    (:class:`text_retrieval.retrieval.index.RetrievalSettings`), at corpus scale
    (``torchrun --nproc_per_node=N`` shares the corpus encoding, which sets ``distributed``):
    ``method`` exact or approximate (recall@10 against exact is reported), ``ann_transform`` how an
    approximate index holds the documents (``mips``: brought to one norm first,
    text_retrieval/retrieval/mips.py says what each measured), ``backend`` for exact search (auto:
    timed), ``memory_gb`` bounds what is held at once, ``chunk_size`` corpus rows per encoding chunk
    (the resume unit); ``cache_dir`` keeps raw corpus embeddings. ``precision``: what encoding
    computes in (``clipmag.runtime.precision``: ``auto`` is bf16 autocast where native, else fp32);
    every record's ``numerics`` says what it resolved to.
    """

    model: list[str] = field(default_factory=list)
    data: list[str] = field(default_factory=list)
    head: HeadChoice = field(default_factory=HeadChoice)
    pooling: PoolingName | None = None
    split: str = "test"
    output: str = "runs/eval_text"
    top_k: PositiveInt = 1000
    batch_size: PositiveInt = 64
    cache_dir: str | None = None
    quiet: bool = False
    precision: Literal[PRECISIONS] = "auto"  # type: ignore[valid-type]
    max_length: PositiveInt | None = None  # both sides, where encoding.*_max_length is not given
    encoding: EvalSettings = field(default_factory=EvalSettings)
    retrieval: RetrievalSettings = field(default_factory=RetrievalSettings)
    index: str | None = None  # a served index (scripts/index.py build) searched instead of the encoded corpus
    index_store: Literal["auto", "faiss", "lancedb", "qdrant"] = "auto"

    RENAMED_KEYS: ClassVar[dict[str, str]] = {"norm": "head.name"}
    RENAMED_VALUES: ClassVar[dict[str, dict[str | None, str]]] = {"head.name": OWN_HEAD_RENAME}


# Every top-level key is a flag of its own name; the sections' keys have the flags users know.
FLAGS = {
    **{name: key for name, key in field_flags(EvalTextConfig).items() if name not in ("head", "encoding", "retrieval")},
    "norm": "head.name",
    **{
        name: f"encoding.{name}"
        for name in ("long_documents", "reasoning", "strict", "query_prefix", "document_prefix")
        + ("query_max_length", "document_max_length", "max_length_cap")
    },
    "search": "retrieval.method",
    "ann_transform": "retrieval.ann_transform",
    "search_backend": "retrieval.backend",
    "search_memory_gb": "retrieval.memory_gb",
    "cache_dtype": "retrieval.cache_dtype",
    "chunk_size": "retrieval.chunk_size",
    "compress": "retrieval.compression",
    "hybrid": "retrieval.hybrid",
}


def parse_args(argv: Sequence[str]) -> EvalTextConfig:
    """``--model M [M ...] --data D [D ...] [--flag value ...] [key=value ...]`` -> a checked config."""
    cfg = parse_cli(EvalTextConfig, argv, FLAGS, description=__doc__)
    missing = [f"--{key}" for key in ("model", "data") if not getattr(cfg, key)]
    if missing:
        raise ConfigError(f"command line: {' and '.join(missing)} needed (one or more values each); see --help")
    return cfg


def main(argv: Sequence[str]) -> list[dict[str, Any]]:
    """Every model on every data set; one JSON per pair under --output, the records returned."""
    cfg = parse_args(argv)  # --help ends here, before torch and the encoders are imported
    from clipmag.runtime.distributed import environment_rank

    rank = environment_rank()
    setup_logging(rank=rank, level=logging.WARNING if cfg.quiet else logging.INFO)
    # one evaluation per --output at a time (rank 0 holds it): two would interleave records and run files
    with FolderLock(cfg.output, "evaluation") if rank == 0 else contextlib.nullcontext():
        return _evaluate(cfg)


def _evaluate(cfg: EvalTextConfig) -> list[dict[str, Any]]:
    from text_retrieval.evaluation.pipeline import evaluate_paths
    from text_retrieval.retrieval.shared_encoding import shared_encoding

    encoding = dataclasses.replace(
        cfg.encoding,
        query_max_length=cfg.encoding.query_max_length or cfg.max_length,
        document_max_length=cfg.encoding.document_max_length or cfg.max_length,
    )
    with shared_encoding(cfg.output, cfg.cache_dir) as (cache_dir, distributed):
        return evaluate_paths(
            cfg.model,
            cfg.data,
            cfg.output,
            norm=cfg.head.instead,
            pooling=cfg.pooling,
            split=cfg.split,
            top_k=cfg.top_k,
            batch_size=cfg.batch_size,
            cache_dir=cache_dir,
            show_progress=not cfg.quiet,
            settings=encoding,
            retrieval=dataclasses.replace(cfg.retrieval, distributed=distributed),
            precision=cfg.precision,
            index=cfg.index,
            index_store=cfg.index_store,
        )


def entry() -> None:
    """Console-script entry: user errors end with one ``error:`` line and exit status 2."""
    run_entry_point(main)
