"""MS MARCO 80K: the paper's training pairs from MS MARCO v1.1 QA, and a dev subset in BEIR layout.

Source: the Hugging Face hub dataset ``microsoft/ms_marco``, config ``v1.1``, at a pinned revision;
its parquet files (``v1.1/train-00000-of-00001.parquet``, ``v1.1/validation-...``) hold per query
``query_id``, ``query``, ``query_type``, ``answers``, ``wellFormedAnswers`` and ``passages``
``{is_selected, passage_text, url}`` (the Bing passages shown to the annotator; ``is_selected`` marks
those the answer was written from).

Selection rule for the training pairs (the paper gives only the count, about 81.8K):

1. a train row counts when its query is non-empty and at least one passage with non-empty text has
   ``is_selected == 1``;
2. its positive is the first such passage in the listed order (one pair per query);
3. its ``negatives`` are its other, unselected passages (distinct texts, listed order): unjudged
   Bing candidates, so some may be relevant; the trainer uses them only with
   ``data.hard_negatives > 0`` (the paper trains on in-batch negatives alone);
4. a pair whose (query, positive) texts equal an earlier row's is dropped (the first is kept).

The count this rule gives is printed and written to ``manifest.json`` with the reasons rows were
left out. The dev subset samples validation queries that pass the same rule (seeded); their
selected passages are the judged documents (gain 1), and a seeded sample of passages of the
*other* validation queries fills the corpus up to its size. The sampled queries' own unselected
passages stay out: they are the likeliest unjudged positives.
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from text_retrieval.data.loaders.reading import DataFormatError
from text_retrieval.data.training.write import (
    DEFAULT_BUILD,
    BuildOptions,
    keep_first_pairs,
    passage_id,
    sample_ids,
    sha256_of,
    write_built_set,
)

logger = logging.getLogger("clipmag")

__all__ = [
    "MSMARCO_REPO",
    "MSMARCO_REVISION",
    "MSMARCO_FILES",
    "QARow",
    "msmarco_url",
    "find_split_files",
    "read_qa_rows",
    "select_pairs",
    "dev_subset",
    "build_msmarco80k",
]

MSMARCO_REPO = "microsoft/ms_marco"
MSMARCO_REVISION = "a47ee7aae8d7d466ba15f9f0bfac3b3681087b3a"  # main since 2024-01-04 (parquet layout)
MSMARCO_FILES = {"train": "v1.1/train-00000-of-00001.parquet", "validation": "v1.1/validation-00000-of-00001.parquet"}
RULE = (
    "one pair per v1.1 train query with a non-empty query and at least one selected (is_selected=1) non-empty "
    "passage: the first selected passage in listed order; negatives = its unselected passages; "
    "pairs repeating an earlier (query, positive) are dropped"
)
_COLUMNS = ("query_id", "query", "passages")


def msmarco_url(file: str, revision: str = MSMARCO_REVISION) -> str:
    """The hub's download URL of one file of the dataset at ``revision``."""
    return f"https://huggingface.co/datasets/{MSMARCO_REPO}/resolve/{revision}/{file}"


@dataclass
class QARow:
    """One query of the QA set: its passages as ``(text, selected)`` in listed order."""

    query_id: str
    query: str
    passages: list[tuple[str, bool]]

    def selected(self) -> list[str]:
        return [text for text, chosen in self.passages if chosen and text]


def find_split_files(source: str | Path, split: str) -> list[Path]:
    """The parquet files of ``split`` in a local copy: the hub layout ``v1.1/<split>-*.parquet``, or
    ``<split>-*.parquet`` directly in ``source``."""
    source = Path(source)
    for folder in (source / "v1.1", source):
        files = sorted(folder.glob(f"{split}-*.parquet"))
        if files:
            return files
    raise FileNotFoundError(
        f"{source}: no {split}-*.parquet (expected MS MARCO v1.1 as on the hub: v1.1/{split}-00000-of-00001.parquet)"
    )


def read_qa_rows(path: str | Path) -> Iterator[QARow]:
    """The rows of one MS MARCO QA parquet file; a missing column or a ragged row names the file."""
    import pyarrow.parquet as pq

    path = Path(path)
    try:
        table = pq.ParquetFile(path)
    except (OSError, ValueError) as err:  # pyarrow's ArrowInvalid is a ValueError; its message names no file
        raise DataFormatError(
            path, None, "a parquet file (MS MARCO v1.1 as on the hub)", f"unreadable: {err}"
        ) from None
    names = table.schema_arrow.names
    passages = table.schema_arrow.field("passages").type if "passages" in names else None
    nested = {passages.field(i).name for i in range(passages.num_fields)} if hasattr(passages, "num_fields") else set()
    if not set(_COLUMNS) <= set(names) or not {"is_selected", "passage_text"} <= nested:
        raise DataFormatError(
            path, None, "MS MARCO QA columns query_id, query, passages{is_selected, passage_text}", f"{names}"
        )
    row = 0
    for batch in table.iter_batches(columns=list(_COLUMNS), batch_size=4096):
        for record in batch.to_pylist():
            row += 1
            texts, flags = record["passages"]["passage_text"], record["passages"]["is_selected"]
            if len(texts) != len(flags):
                raise DataFormatError(path, None, f"row {row}: as many is_selected flags as passages", f"{flags}")
            passages = [((t or "").strip(), bool(f)) for t, f in zip(texts, flags)]
            yield QARow(str(record["query_id"]), (record["query"] or "").strip(), passages)


def _reason_left_out(row: QARow) -> str | None:
    if not row.query:
        return "empty_query"
    if not row.selected():
        return "no_selected_passage"
    return None


def _candidate(row: QARow) -> dict[str, Any] | str:
    """The row's pair by the module's rule, or the reason it has none."""
    reason = _reason_left_out(row)
    if reason is not None:
        return reason
    positive = row.selected()[0]
    negatives = list(dict.fromkeys(t for t, chosen in row.passages if t and not chosen and t != positive))
    return {"query_id": row.query_id, "query": row.query, "positive": positive, "negatives": negatives}


def select_pairs(rows: Iterator[QARow]) -> tuple[list[dict[str, Any]], Counter]:
    """The training pairs by the module's rule, and the counts of rows read and left out (by reason)."""
    return keep_first_pairs(map(_candidate, rows), "rows")


def dev_subset(
    rows: list[QARow], n_queries: int, corpus_size: int, seed: int
) -> tuple[dict[str, str], dict[str, str], dict[str, dict[str, int]], dict[str, Any]]:
    """Seeded dev queries with their judged passages plus distractors from the other queries.

    Returns queries, corpus (id -> text), qrels and what was drawn. The corpus holds ``corpus_size``
    passages, or every passage available (with a warning) when the other queries hold fewer.
    """
    eligible = {}
    for row in rows:
        if _reason_left_out(row) is None:
            eligible.setdefault(row.query_id, row)
    chosen = sample_ids(list(eligible), n_queries, seed, "dev queries (MS MARCO v1.1 validation)")
    queries = {qid: eligible[qid].query for qid in chosen}
    corpus, qrels = {}, {}
    for qid in chosen:
        for text in eligible[qid].selected():
            corpus[passage_id(text)] = text
            qrels.setdefault(qid, {})[passage_id(text)] = 1
    picked = set(chosen)
    pool = {}
    for row in rows:
        if row.query_id not in picked:
            pool.update((passage_id(t), t) for t, _ in row.passages if t and passage_id(t) not in corpus)
    wanted = corpus_size - len(corpus)
    if wanted > len(pool):
        logger.warning("dev corpus: %d distractors asked for, the other queries hold %d; taking all", wanted, len(pool))
    distractors = random.Random(seed).sample(sorted(pool), max(0, min(wanted, len(pool))))
    corpus.update((d, pool[d]) for d in distractors)
    info = {"seed": seed, "judged_passages": len(corpus) - len(distractors), "distractors": len(distractors)}
    return queries, corpus, qrels, info


def build_msmarco80k(
    source: str | Path, out: str | Path, options: BuildOptions = DEFAULT_BUILD, revision: str = MSMARCO_REVISION
) -> dict[str, Any]:
    """Build ``out/pairs.jsonl``, ``out/shards/``, ``out/dev/`` and ``out/manifest.json`` from a local
    copy of MS MARCO v1.1 (``source``, see :func:`find_split_files`); returns the manifest."""
    out = Path(out)
    train_files, dev_files = find_split_files(source, "train"), find_split_files(source, "validation")
    pairs, counts = select_pairs(row for f in train_files for row in read_qa_rows(f))
    if not pairs:
        raise ValueError(f"{source}: no MS MARCO train row has a selected passage")
    dev_rows = [row for f in dev_files for row in read_qa_rows(f)]
    queries, corpus, qrels, drawn = dev_subset(dev_rows, options.dev_queries, options.dev_corpus, options.seed)
    origin = {"repo": MSMARCO_REPO, "config": "v1.1", "revision": revision, "source": str(source)}
    described = {
        "dataset": "MS MARCO 80K (MS MARCO v1.1 QA train)",
        **origin,
        "files": {f.name: sha256_of(f) for f in [*train_files, *dev_files]},
        "rule": RULE,
    }
    dev = (queries, corpus, qrels, {**origin, "split": "validation", **drawn})
    manifest = write_built_set(out, pairs, counts, dev, described, options)  # nothing is written before
    logger.info("MS MARCO 80K: %d pairs from %d train rows -> %s", len(pairs), counts["rows"], out)
    return manifest
