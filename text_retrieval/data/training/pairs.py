"""Training samples ``{"query", "positive", "negatives"}`` from the sources the shard builder accepts.

Two sources, one function each, both returning a list in a deterministic order (the bundled
default's pairs come from :func:`text_retrieval.data.bundled.build.pairs_from_bundled`):

* a BEIR folder: every judged-relevant (query, document) pair of a qrels split (``train``);
* a jsonl file of pairs or triples ``{"query", "positive", "negatives"?}``, or of
  ``{"query", "title", "text"}`` records (the SciFact train-pairs layout), where the positive is
  title and text joined as the BEIR loader joins them (read by
  :mod:`text_retrieval.data.loaders.pairs`, which also reads a pairs file as an evaluation set);

Malformed input fails with the file and line (``DataFormatError``), never half-way through
writing shards.
"""

from __future__ import annotations

import logging
import random
from pathlib import Path

from text_retrieval.data.loaders.beir import load_beir
from text_retrieval.data.loaders.pairs import Sample, pairs_from_jsonl

__all__ = ["Sample", "pairs_from_beir", "pairs_from_jsonl", "shuffled"]

logger = logging.getLogger("clipmag")


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


def shuffled(samples: list[Sample], seed: int) -> list[Sample]:
    """A seeded shuffle, so shards built from sorted sources mix topics within each batch."""
    out = list(samples)
    random.Random(seed).shuffle(out)
    return out
