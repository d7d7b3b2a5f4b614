"""Serve a text export: build an index of a corpus in faiss, LanceDB and Qdrant under the head the model
was trained with, query it, and check that the served ranking is the one the evaluation measured.

Examples:
    python scripts/index.py build --model runs/text/qnorm/export --corpus data/beir/scifact --output runs/index/scifact
    python scripts/index.py build --model all-MiniLM-L6-v2 --norm cosine --corpus data/beir/scifact \\
        --output runs/index/scifact-hnsw --stores faiss --faiss hnsw
    python scripts/index.py query --index runs/index/scifact --text "vitamin d and infections" --top-k 5
    python scripts/eval_text.py --model runs/text/qnorm/export --data data/beir/scifact --index runs/index/scifact

``build`` encodes ``--corpus`` (a BEIR folder or its corpus.jsonl) with ``--model`` under its own head
(``--norm`` names another) as ``eval_text.py`` encodes it, and writes ``--output``: a faiss index
(``--faiss flat``, ``hnsw`` or ``ivf``), a LanceDB table and a Qdrant local-mode collection
(``--stores`` picks), the documents stored as the head needs them (``docs/deploy.md``), with
``manifest.json`` naming the model, its weights fingerprint, the head record, the corpus and the
commit. ``--metric`` is ``ip`` (right for every head); ``cosine`` and ``l2`` are refused for a head
that ranks by the document norm unless ``--mips`` brings every document to one norm first.
``--compress`` stores the documents compressed (``truncate:K``, ``int8``, ``binary``, each with
``+norm`` to keep the norm).

A learnable export is served from its own record: its ``clipmag_head.json`` holds the learned
``gq`` and ``gd``; ``build`` stores every document as ``d / |d|^gd`` under ``--metric ip`` and
writes the gammas into ``manifest.json``, and ``query`` sends ``q / |q|^gq``, so the inner product
is the head's score. Another engine takes the same recipe: read the two gammas, transform both
sides, search with its inner-product setting (docs/deploy.md, "A learnable head, engine by engine");
a cosine setting serves it only where it learned ``gd = 1``.

``query`` prints each query's top ``--top-k`` documents as JSON lines (``--output`` writes them to a
file), with the index's model unless ``--model`` names another, which must be the same weights and
head (the manifest is checked). Queries come from ``--text`` (one or more) or ``--queries`` (a
BEIR queries.jsonl). Every key is also a ``key=value`` token.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from clipmag.config.checks import PositiveInt
from clipmag.config.command_line import field_flags, help_text, parse_cli
from clipmag.config.entry import run_entry_point
from clipmag.errors import ConfigError
from clipmag.runtime.logs import setup_logging
from clipmag.runtime.precision_setting import PRECISIONS
from clipmag.scoring.head_config import OWN_HEAD_RENAME, HeadChoice
from text_retrieval.config import PoolingName
from text_retrieval.data.loaders import EvalSettings
from text_retrieval.data.loaders.beir import corpus_fingerprint, read_corpus, read_queries
from text_retrieval.data.loaders.reading import find_file
from text_retrieval.serving.manifest import STORES, Corpus

if TYPE_CHECKING:
    from text_retrieval.model.encoder import TextEncoder
    from text_retrieval.serving.served import ServedIndex

__all__ = ["BuildCommand", "QueryCommand", "main", "entry"]

StoreName = Literal[STORES]  # type: ignore[valid-type]


@dataclass
class BuildCommand:
    """``build``: encode a corpus with a model under its head and write a served index; ``head.name``
    (``--norm``) scores with another head than the model's own, as in every other tool."""

    model: str = ""
    corpus: str = ""
    output: str = ""
    head: HeadChoice = field(default_factory=HeadChoice)
    pooling: PoolingName | None = None
    stores: list[StoreName] = field(default_factory=lambda: list(STORES))
    faiss: Literal["flat", "hnsw", "ivf"] = "flat"
    metric: Literal["ip", "cosine", "l2"] = "ip"
    mips: bool = False
    compress: str = "none"
    max_length: PositiveInt | None = None
    batch_size: PositiveInt = 64
    cache_dir: str | None = None
    precision: Literal[PRECISIONS] = "auto"  # type: ignore[valid-type]
    overwrite: bool = False
    quiet: bool = False

    RENAMED_KEYS: ClassVar[dict[str, str]] = {"norm": "head.name"}
    RENAMED_VALUES: ClassVar[dict[str, dict[str | None, str]]] = {"head.name": OWN_HEAD_RENAME}


@dataclass
class QueryCommand:
    """``query``: the top documents of each query from a served index."""

    index: str = ""
    text: list[str] = field(default_factory=list)
    queries: str | None = None
    top_k: PositiveInt = 10
    store: Literal["auto", "faiss", "lancedb", "qdrant"] = "auto"
    model: str | None = None
    output: str | None = None
    batch_size: PositiveInt = 64
    precision: Literal[PRECISIONS] = "auto"  # type: ignore[valid-type]
    quiet: bool = False


COMMANDS = {"build": BuildCommand, "query": QueryCommand}


def command_flags(command: type) -> dict[str, str]:
    """A command's flags: every top-level key, and ``--norm`` for ``head.name`` where it takes a head."""
    flags = {name: key for name, key in field_flags(command).items() if name != "head"}
    return {**flags, "norm": "head.name"} if "head" in field_flags(command) else flags


def read_corpus_source(path: str | Path) -> Corpus:
    """A BEIR folder's corpus (named by the folder, as ``eval_text.py`` names it) or a corpus.jsonl[.gz]."""
    path = Path(path)
    file = find_file(path, "corpus.jsonl", "corpus.jsonl.gz") if path.is_dir() else path
    if file is None and path.is_dir():
        raise FileNotFoundError(
            f"--corpus {path}: is a directory holding no corpus.jsonl[.gz]; give a BEIR folder or the corpus file"
        )
    if file is None or not file.is_file():
        raise FileNotFoundError(f"--corpus {path}: no such corpus file (give a BEIR folder or its corpus.jsonl[.gz])")
    ids, texts = read_corpus(file)
    name = path.name if path.is_dir() else file.parent.name
    return Corpus(name, ids, texts, corpus_fingerprint(ids, texts), str(path))


def _build(cfg: BuildCommand) -> dict[str, Any]:
    for key in ("model", "corpus", "output"):
        if not getattr(cfg, key):
            raise ConfigError(f"build: --{key} is needed; see --help")
    from text_retrieval.model.encoder import TextEncoder  # torch, transformers, faiss: only to run a command
    from text_retrieval.serving.served import build_served_index

    corpus = read_corpus_source(cfg.corpus)  # a wrong --corpus is named before a model loads
    encoder = TextEncoder.from_pretrained(
        cfg.model, norm=cfg.head.instead, pooling=cfg.pooling, precision=cfg.precision
    )
    settings = EvalSettings(query_max_length=cfg.max_length, document_max_length=cfg.max_length)
    manifest = build_served_index(
        encoder,
        corpus,
        cfg.output,
        stores=cfg.stores,
        faiss_kind=cfg.faiss,
        metric=cfg.metric,
        mips=cfg.mips,
        compression=cfg.compress,
        settings=settings,
        batch_size=cfg.batch_size,
        cache_dir=cfg.cache_dir,
        overwrite=cfg.overwrite,
        show_progress=not cfg.quiet,
    )
    print(
        f"{cfg.output}: {manifest.documents} documents of {manifest.corpus['name']} under "
        f"{manifest.record.head_name}, metric {manifest.metric}, stores {', '.join(manifest.stores)}"
    )
    return {"manifest": manifest}


def _query_encoder(served: ServedIndex, model: str | None, precision: str) -> TextEncoder:
    """The index's model with the head and encoding settings it was built with (``model``: another, checked)."""
    from clipmag.scoring.heads import build_head
    from text_retrieval.model.encoder import TextEncoder

    record = served.manifest.record
    sides = ("query_prefix", "document_prefix", "query_max_length", "document_max_length")
    encoder = TextEncoder.from_pretrained(
        model or served.manifest.encoder["model"],
        head=build_head(record),
        pooling=record.pooling,
        precision=precision,
        **{key: getattr(record, key) for key in sides},
    )
    served.manifest.check_encoder(encoder, served.folder)
    return encoder


def _query(cfg: QueryCommand) -> list[dict[str, Any]]:
    if not cfg.index or bool(cfg.text) == bool(cfg.queries):
        raise ConfigError("query: give --index and either --text (one or more) or --queries FILE; see --help")
    from text_retrieval.serving.served import ServedIndex

    served = ServedIndex(cfg.index, cfg.store)
    encoder = _query_encoder(served, cfg.model, cfg.precision)
    if cfg.queries:
        path = Path(cfg.queries)
        if path.is_dir():
            path = find_file(path, "queries.jsonl", "queries.jsonl.gz") or path / "queries.jsonl"
        queries = read_queries(path)
    else:
        queries = {str(i): text for i, text in enumerate(cfg.text)}
    vectors = encoder.encode(list(queries.values()), "query", cfg.batch_size, show_progress=not cfg.quiet)
    scores, positions = served.search(vectors, cfg.top_k)
    lines = []
    for row, (qid, text) in enumerate(queries.items()):
        hits = [(served.ids[p], float(s)) for p, s in zip(positions[row], scores[row]) if p >= 0]
        lines.append({"query_id": qid, "query": text, "hits": [{"id": d, "score": s} for d, s in hits]})
    out = open(cfg.output, "w", encoding="utf-8") if cfg.output else sys.stdout
    try:
        out.writelines(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
    finally:
        if cfg.output:
            out.close()
    return lines


def parse_args(argv: Sequence[str]) -> BuildCommand | QueryCommand:
    """``build ...`` or ``query ...`` -> that command's checked config (runs nothing)."""
    if not argv or argv[0] not in COMMANDS:
        given = repr(argv[0]) if argv else "nothing"
        raise ConfigError(f"command line: {given} is not a command; valid: {', '.join(COMMANDS)}")
    command = COMMANDS[argv[0]]
    return parse_cli(command, argv[1:], command_flags(command), description=__doc__)


def main(argv: Sequence[str]) -> Any:
    """``build ...`` or ``query ...``; ``--help`` lists both commands' flags."""
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        for name, command in COMMANDS.items():
            print(f"\n{name}:\n" + help_text(command(), command_flags(command)))
        raise SystemExit(0)
    cfg = parse_args(argv)
    setup_logging(level=logging.WARNING if cfg.quiet else logging.INFO)
    return _build(cfg) if isinstance(cfg, BuildCommand) else _query(cfg)


def entry() -> None:
    """Console-script entry (``clipmag-index``): user errors end with one ``error:`` line and exit status 2."""
    run_entry_point(main)
