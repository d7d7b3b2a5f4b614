"""BRIGHT (reasoning-intensive retrieval) from local files.

One task per folder, as written by :func:`text_retrieval.data.download.download_bright` from the
public ``xlangai/BRIGHT`` release:

* ``examples.jsonl``: ``{"id", "query", "gold_ids": [...], "excluded_ids": [...]}`` per line
  (``gold_ids_long`` is used instead of ``gold_ids`` with ``long_documents``);
* ``documents.jsonl`` (or ``long_documents.jsonl``): ``{"id", "content"}`` per line.

BRIGHT's protocol scores every gold id with gain 1 and removes each query's ``excluded_ids`` from
the ranking before scoring; the placeholder ``"N/A"`` means "nothing excluded". Unlike BEIR, hits
whose id equals the query id are kept: BRIGHT's ids live in separate namespaces.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from text_retrieval.data.beir import RetrievalDataset
from text_retrieval.data.common import DataFormatError, find_file, iter_jsonl, require_str

logger = logging.getLogger("clipmag")

__all__ = ["load_bright", "is_bright_folder", "BRIGHT_TASKS"]

BRIGHT_TASKS = (
    "biology", "earth_science", "economics", "psychology", "robotics", "stackoverflow",
    "sustainable_living", "leetcode", "pony", "aops", "theoremqa_questions", "theoremqa_theorems",
)
_EXAMPLE_FILES = ("examples.jsonl", "examples.jsonl.gz")


def is_bright_folder(path: str | Path) -> bool:
    path = Path(path)
    return path.is_dir() and find_file(path, *_EXAMPLE_FILES) is not None and find_file(
        path, "documents.jsonl", "documents.jsonl.gz", "long_documents.jsonl", "long_documents.jsonl.gz"
    ) is not None


def _id_list(obj: dict[str, Any], key: str, path: Path, line: int, required: bool) -> list[str]:
    if key not in obj or obj[key] is None:
        if required:
            raise DataFormatError(path, line, f"a {key!r} list", f"keys {sorted(obj)}")
        return []
    value = obj[key]
    if not isinstance(value, list) or not all(isinstance(v, (str, int)) for v in value):
        raise DataFormatError(path, line, f"{key!r} to be a list of ids", repr(value)[:80])
    return [str(v) for v in value if str(v) != "N/A"]


def load_bright(path: str | Path, long_documents: bool = False, strict: bool = True) -> RetrievalDataset:
    """Load one BRIGHT task folder into a :class:`RetrievalDataset` with ``excluded`` filled in."""
    folder = Path(path)
    examples_path = find_file(folder, *_EXAMPLE_FILES)
    stem = "long_documents" if long_documents else "documents"
    docs_path = find_file(folder, f"{stem}.jsonl", f"{stem}.jsonl.gz")
    if examples_path is None or docs_path is None:
        raise FileNotFoundError(f"{folder}: a BRIGHT task folder needs examples.jsonl and {stem}.jsonl")

    corpus_ids: list[str] = []
    corpus_texts: list[str] = []
    for number, obj in iter_jsonl(docs_path):
        corpus_ids.append(require_str(obj, "id", docs_path, number, allow_empty=False))
        corpus_texts.append(require_str(obj, "content", docs_path, number))
    if not corpus_ids:
        raise DataFormatError(docs_path, None, "at least one document ({\"id\", \"content\"} per line)", "an empty file")
    known = set(corpus_ids)

    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    excluded: dict[str, set[str]] = {}
    gold_key = "gold_ids_long" if long_documents else "gold_ids"
    for number, obj in iter_jsonl(examples_path):
        qid = require_str(obj, "id", examples_path, number, allow_empty=False)
        if qid in queries:
            raise DataFormatError(examples_path, number, f"a unique 'id' ({qid!r} repeats)")
        text = require_str(obj, "query", examples_path, number, allow_empty=False)
        gold = _id_list(obj, gold_key, examples_path, number, required=True)
        missing = [d for d in gold if d not in known]
        if missing:
            problem = DataFormatError(examples_path, number, f"gold ids present in {docs_path.name}", f"missing {missing[:5]}")
            if strict:
                raise problem
            logger.warning("%s; dropping them", problem)
            gold = [d for d in gold if d in known]
        if not gold:
            if strict:
                raise DataFormatError(examples_path, number, f"at least one id in {gold_key!r}", "none")
            continue
        skip = set(_id_list(obj, "excluded_ids", examples_path, number, required=False))
        clash = skip.intersection(gold)
        if clash:
            raise DataFormatError(examples_path, number, "excluded_ids disjoint from the gold ids", f"both: {sorted(clash)[:5]}")
        queries[qid] = text
        qrels[qid] = {d: 1 for d in gold}
        if skip:
            excluded[qid] = skip
    if not queries:
        raise DataFormatError(examples_path, None, "at least one example ({\"id\", \"query\", \"gold_ids\"})", "none")
    logger.info("loaded BRIGHT %s: %d docs, %d queries", folder.name, len(corpus_ids), len(queries))
    return RetrievalDataset(
        name=f"bright-{folder.name}" + ("-long" if long_documents else ""), corpus_ids=corpus_ids,
        corpus_texts=corpus_texts, queries=queries, qrels=qrels, excluded=excluded,
        ignore_identical_ids=False, kind="bright", split="test", source=str(folder.resolve()),
    )
