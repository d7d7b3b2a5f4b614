"""A dev split carved from a BEIR set's training queries: data to choose settings and checkpoints on
that shares no query with the set's test split, for sets (SciFact) that ship train and test only.

``build_dev_split(source, out)`` orders the queries judged in ``qrels/train.tsv`` by
``sha256(f"{seed}:{query_id}")`` and takes the first ``dev_queries`` as dev; every judged pair of
the other training queries is a training pair. It writes, as the MS MARCO builders do
(:mod:`text_retrieval.data.training.write`): ``pairs.jsonl`` and ``shards/`` (the training pairs,
shuffled with ``seed``), ``dev/`` (BEIR layout, split ``dev``: the dev queries, their judged
documents and a seeded sample of the other documents up to ``dev_corpus``, so that choosing on dev
stays cheap) and ``manifest.json`` (the rule, the dev query ids, every count, the source files'
sha256). A dev query that is also a test query, by id or by text, is an error: the split must not
read the test set. The same source and settings give the same files.

    python -m text_retrieval.data.training.beir_dev_split data/beir/scifact runs/data/scifact-split
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clipmag.config.checks import PositiveInt
from clipmag.config.command_line import field_flags, parse_cli, require_words
from clipmag.errors import UserError
from clipmag.runtime.logs import setup_logging
from text_retrieval.data.loaders.beir import load_beir
from text_retrieval.data.training.write import BuildOptions, sample_ids, sha256_of, write_built_set

__all__ = ["DevSplitCommand", "build_dev_split", "main"]


def _dev_queries(train_ids: Sequence[str], n: int, seed: int, source: Path) -> list[str]:
    if not 0 < n < len(train_ids):
        raise UserError(f"{source}: {len(train_ids)} training queries; dev_queries must be between 1 and one fewer")
    return sorted(train_ids, key=lambda q: hashlib.sha256(f"{seed}:{q}".encode()).hexdigest())[:n]


def _refuse_test_overlap(source: Path, dev: dict[str, str]) -> None:
    """A dev query that is a test query (id or case-folded text) would tune on the test set."""
    if not (source / "qrels" / "test.tsv").is_file():
        return
    test = load_beir(source, split="test")
    texts = {" ".join(t.casefold().split()) for q, t in test.queries.items() if q in test.qrels}
    shared = sorted(q for q, t in dev.items() if q in test.qrels or " ".join(t.casefold().split()) in texts)
    if shared:
        raise UserError(
            f"{source}: training queries {', '.join(shared[:5])} are test queries too; no dev split is safe"
        )


def build_dev_split(
    source: str | Path,
    out: str | Path,
    *,
    dev_queries: int = 100,
    dev_corpus: int = 1000,
    seed: int = 0,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Write the split under ``out`` (module docstring); returns its manifest."""
    source, out = Path(source), Path(out)
    train = load_beir(source, split="train")
    dev_ids = _dev_queries(sorted(train.qrels), dev_queries, seed, source)
    dev_texts = {q: train.queries[q] for q in dev_ids}
    _refuse_test_overlap(source, dev_texts)
    texts = dict(zip(train.corpus_ids, train.corpus_texts))
    counts: Counter = Counter()
    pairs = []
    for qid in sorted(set(train.qrels) - set(dev_ids)):
        for doc_id, gain in sorted(train.qrels[qid].items()):
            if gain > 0:
                pairs.append({"query_id": qid, "query": train.queries[qid], "positive": texts[doc_id], "negatives": []})
    counts.update(training_queries=len(set(train.qrels) - set(dev_ids)), dev_queries=len(dev_ids))
    dev_qrels = {q: {d: g for d, g in train.qrels[q].items() if g > 0} for q in dev_ids}
    judged = sorted({d for judged in dev_qrels.values() for d in judged})
    others = sorted(set(train.corpus_ids) - set(judged))
    extra = sample_ids(others, min(len(others), max(0, dev_corpus - len(judged))), seed, "dev corpus") if others else []
    corpus = {d: texts[d] for d in [*judged, *extra]}
    described = {
        "source": str(source),
        "rule": f"dev: the {dev_queries} training queries first by sha256('{seed}:<query id>'); train: the others",
        "dev_query_ids": dev_ids,
        "source_sha256": {name: sha256_of(source / name) for name in ("queries.jsonl", "qrels/train.tsv")},
    }
    info = {"seed": seed, "source": str(source), "split": "dev"}
    options = BuildOptions(seed=seed, overwrite=overwrite)
    return write_built_set(out, pairs, counts, (dev_texts, corpus, dev_qrels, info), described, options)


@dataclass
class DevSplitCommand:
    """SOURCE OUT: the BEIR folder (with ``qrels/train.tsv``) and the output folder."""

    source: str = ""
    out: str = ""
    dev_queries: PositiveInt = 100
    dev_corpus: PositiveInt = 1000
    seed: int = 0
    overwrite: bool = False


def main(argv: Sequence[str]) -> None:
    """``python -m text_retrieval.data.training.beir_dev_split SOURCE OUT``."""
    cmd = parse_cli(
        DevSplitCommand, argv, field_flags(DevSplitCommand), description=__doc__, positional=("source", "out")
    )
    require_words(cmd, ("source", "out"))
    setup_logging()
    manifest = build_dev_split(
        cmd.source,
        cmd.out,
        dev_queries=cmd.dev_queries,
        dev_corpus=cmd.dev_corpus,
        seed=cmd.seed,
        overwrite=cmd.overwrite,
    )
    print(f"{manifest['pairs']} training pairs -> {Path(cmd.out) / 'shards'}, dev -> {Path(cmd.out) / 'dev'}")


if __name__ == "__main__":
    from clipmag.config.entry import run_entry_point

    run_entry_point(main)
