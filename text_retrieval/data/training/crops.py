"""Contriever-style positive pairs: two independent random crops of one document.

Contriever pretrains without labels by taking two random spans of the same document as a query
and its positive, with the other documents of the batch as negatives. ``data.pairs=crops`` makes
the text trainer do this: each training sample's ``positive`` is the document (its ``query`` names
it and is not read), and every micro-batch replaces the pair by two crops drawn afresh, so a
document seen in two epochs gives two other pairs.

A crop is a contiguous span of the document's whitespace-separated words whose length is a
fraction of the document's, drawn uniformly from ``ratio`` = [lo, hi] (Contriever's 0.1-0.5), at a
uniformly drawn start; the two crops are drawn independently and may overlap. Cropping words rather
than tokens keeps the pairs the same under any tokenizer (whitespace is rejoined as single spaces,
which a WordPiece tokenizer reads the same). The random stream of a crop is seeded by the run's
seed, the micro-batch's index and the document's text, so the pairs are the same on any number of
ranks and after a resume.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

__all__ = ["DEFAULT_CROP_RATIO", "random_crop", "crop_pair", "cropped_batches"]

DEFAULT_CROP_RATIO = (0.1, 0.5)  # Contriever's ratio_min / ratio_max


def random_crop(words: Sequence[str], ratio: tuple[float, float], rng: random.Random) -> str:
    """A contiguous span of ``words`` holding a ``uniform(*ratio)`` share of them (at least one word)."""
    length = max(1, round(rng.uniform(*ratio) * len(words)))
    start = rng.randrange(len(words) - length + 1)
    return " ".join(words[start : start + length])


def crop_pair(document: str, ratio: tuple[float, float], seed: int, micro_batch: int) -> tuple[str, str]:
    """Two independent crops of ``document`` (query, positive), seeded by the run's seed, the
    micro-batch's index and the document's text."""
    words = document.split()
    if not words:
        raise ValueError("a document to crop holds no words")
    digest = hashlib.sha1(document.encode("utf-8")).hexdigest()
    rng = random.Random(f"crops:{seed}:{micro_batch}:{digest}")
    return random_crop(words, ratio, rng), random_crop(words, ratio, rng)


def cropped_batches(
    batches: Iterator[Mapping[str, Any]], ratio: tuple[float, float], seed: int, start: int
) -> Iterator[dict[str, Any]]:
    """The micro-batches of ``batches`` (the first being micro-batch ``start``) with each sample's
    pair replaced by two crops of its ``positive``; no hard negatives (the batch's other documents
    are the negatives)."""
    for index, batch in enumerate(batches, start=start):
        pairs = [crop_pair(document, ratio, seed, index) for document in batch["positive"]]
        yield {"query": [q for q, _ in pairs], "positive": [p for _, p in pairs], "negatives": [[] for _ in pairs]}
