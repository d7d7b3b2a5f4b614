"""Training samples ``{"query", "positive", "negatives"}`` from the sources the shard builder accepts.

Two sources, one function each, both returning a list in a deterministic order (the bundled
default's pairs come from :func:`text_retrieval.data.bundled.build.pairs_from_bundled`):

* a BEIR folder: every judged-relevant (query, document) pair of a qrels split (``train``);
* a jsonl file of pairs or triples ``{"query", "positive", "negatives"?}``, or of
  ``{"query", "title", "text"}`` records (the SciFact train-pairs layout), where the positive is
  title and text joined as the BEIR loader joins them;

Malformed input fails with the file and line (``DataFormatError``), never half-way through
writing shards.
"""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Any

from text_retrieval.data.loaders.beir import load_beir
from text_retrieval.data.loaders.reading import DataFormatError, iter_jsonl, preview, require_str

logger = logging.getLogger("clipmag")

Sample = dict[str, Any]


def pairs_from_beir(folder: str | Path, split: str = "train") -> list[Sample]:
    """One sample per judged-relevant (query, document) pair of ``qrels/<split>.tsv``."""
    data = load_beir(folder, split=split)
    texts = dict(zip(data.corpus_ids, data.corpus_texts))
    samples = []
    for qid in sorted(data.qrels):
        for doc_id, gain in sorted(data.qrels[qid].items()):
            if gain > 0:
                samples.append({"query": data.queries[qid], "positive": texts[doc_id], "negatives": []})
    if not samples:
        raise ValueError(f"{folder}: qrels/{split}.tsv has no relevant (score > 0) judgment")
    logger.info("%s/%s: %d training pairs", Path(folder).name, split, len(samples))
    return samples


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


def pairs_from_jsonl(path: str | Path) -> list[Sample]:
    """Samples from a jsonl file of pairs/triples or of SciFact-style ``{query, title, text}``."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"training pairs file not found: {path}")
    samples = [_sample_from_record(obj, path, line) for line, obj in iter_jsonl(path)]
    if not samples:
        raise DataFormatError(path, None, "at least one training pair", "an empty file")
    return samples


def shuffled(samples: list[Sample], seed: int) -> list[Sample]:
    """A seeded shuffle, so shards built from sorted sources mix topics within each batch."""
    out = list(samples)
    random.Random(seed).shuffle(out)
    return out
