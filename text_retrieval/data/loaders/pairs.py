"""A file of (query, document) pairs, the form in which a user most often has their own data: read
as training samples, or as a retrieval set to validate or test on.

Two layouts:

* JSONL, one object a line: ``{"query", "positive", "negatives"?}`` (pairs, or triples with hard
  negatives), or ``{"query", "title", "text"}`` (the SciFact train-pairs layout), whose positive is
  title and text joined as the BEIR loader joins them;
* TSV, ``query<TAB>document`` a line, no header and no quoting (one-line texts; texts with line
  breaks or hard negatives go in JSONL).

As a retrieval set every distinct query is judged relevant to its own documents, and the corpus is
every distinct document of the file (positives and negatives), so each query is ranked against the
other pairs' documents. Malformed input fails with the file and line (``DataFormatError``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from text_retrieval.data.loaders.beir import RetrievalDataset
from text_retrieval.data.loaders.reading import DataFormatError, iter_jsonl, iter_tsv, preview, require_str

__all__ = ["Sample", "is_pairs_file", "names_pairs_file", "read_pairs", "pairs_from_jsonl", "pairs_retrieval_set"]

Sample = dict[str, Any]
JSONL_SUFFIXES = (".jsonl", ".jsonl.gz")
TSV_SUFFIXES = (".tsv", ".tsv.gz")


def _first_tsv_row(path: Path) -> list[str] | None:
    return next((fields for _, fields in iter_tsv(path)), None)


def names_pairs_file(path: str | Path) -> bool:
    """A JSONL or TSV file, which the contrastive objective trains on as pairs (``read_pairs`` names
    a malformed line)."""
    path = Path(path)
    return path.is_file() and path.name.endswith(JSONL_SUFFIXES + TSV_SUFFIXES)


def is_pairs_file(path: str | Path) -> bool:
    """A JSONL file, or a TSV file whose first line holds two fields (an STS file holds a score
    too, so three or more)."""
    path = Path(path)
    if not path.is_file():
        return False
    if path.name.endswith(JSONL_SUFFIXES):
        return True
    return path.name.endswith(TSV_SUFFIXES) and len(_first_tsv_row(path) or []) == 2


def _sample_from_record(obj: dict[str, Any], path: Path, line: int) -> Sample:
    query = require_str(obj, "query", path, line, allow_empty=False)
    if "positive" in obj:
        positive = require_str(obj, "positive", path, line, allow_empty=False)
    elif "text" in obj:
        title = obj.get("title") or ""
        if not isinstance(title, str):
            raise DataFormatError(path, line, "'title' to be a string", type(title).__name__)
        positive = (title + " " + require_str(obj, "text", path, line)).strip()
        if not positive:
            raise DataFormatError(path, line, "a non-empty 'title' or 'text'")
    else:
        raise DataFormatError(path, line, "a 'positive' field (or 'title'/'text')", f"keys {sorted(obj)}")
    negatives = obj.get("negatives") or []
    if isinstance(negatives, str):
        negatives = [negatives]
    if not isinstance(negatives, list) or not all(isinstance(n, str) and n.strip() for n in negatives):
        raise DataFormatError(path, line, "'negatives' to be a list of non-empty strings", preview(negatives))
    return {"query": query, "positive": positive, "negatives": negatives}


def _sample_from_row(fields: list[str], path: Path, line: int) -> Sample:
    if len(fields) != 2 or not all(field.strip() for field in fields):
        raise DataFormatError(
            path, line, "two non-empty fields query<TAB>document (hard negatives: use JSONL)", preview(fields)
        )
    return {"query": fields[0], "positive": fields[1], "negatives": []}


def _samples(path: Path, layout: str) -> list[Sample]:
    """Every line of ``path`` read as a sample of ``layout`` (``jsonl`` or ``tsv``); at least one."""
    if not path.is_file():
        raise FileNotFoundError(f"training pairs file not found: {path}")
    if layout == "tsv":
        samples = [_sample_from_row(fields, path, line) for line, fields in iter_tsv(path)]
    else:
        samples = [_sample_from_record(obj, path, line) for line, obj in iter_jsonl(path)]
    if not samples:
        raise DataFormatError(path, None, "at least one training pair", "an empty file")
    return samples


def pairs_from_jsonl(path: str | Path) -> list[Sample]:
    """Samples from a JSONL file of pairs/triples or of SciFact-style ``{query, title, text}``."""
    return _samples(Path(path), "jsonl")


def read_pairs(path: str | Path) -> list[Sample]:
    """The samples of a pairs file, JSONL or TSV (by its name), in file order."""
    path = Path(path)
    return _samples(path, "tsv" if path.name.endswith(TSV_SUFFIXES) else "jsonl")


def pairs_retrieval_set(path: str | Path) -> RetrievalDataset:
    """The pairs of ``path`` as a retrieval set: each distinct query relevant to its documents, the
    corpus every distinct document, ids in file order (``q0``, ``d0``, ...)."""
    path = Path(path)
    doc_ids: dict[str, str] = {}
    query_ids: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    for sample in read_pairs(path):
        for text in (sample["positive"], *sample["negatives"]):
            doc_ids.setdefault(text, f"d{len(doc_ids)}")
        qid = query_ids.setdefault(sample["query"], f"q{len(query_ids)}")
        qrels.setdefault(qid, {})[doc_ids[sample["positive"]]] = 1
    return RetrievalDataset(
        name=path.name.split(".")[0],
        corpus_ids=list(doc_ids.values()),
        corpus_texts=list(doc_ids),
        queries={qid: query for query, qid in query_ids.items()},
        qrels=qrels,
        kind="pairs",
        split="all",
        source=str(path),
    )
