"""Held-out splits fit for retrieval: no query image that nearly repeats an image of another split,
no caption that belongs to several images.

An image that repeats a training image (or an earlier held-out one) turns a test of generalisation
into a lookup, and two identical query images tie in every ranking. A caption shared by several
test images (two emoji with one German name) has several right answers, so its rank is decided by
the order of the tie. Both are removed before the shards are written, and the record says how many.

Near-identity is read from a small colour thumbnail (``SIGNATURE_SIDE`` pixels a side, box-averaged,
so a resampling's last bits do not matter): two images are near duplicates when their thumbnails
differ by less than ``NEAR_DUPLICATE_MEAN_ABS`` grey levels (of 255) on average over every pixel and
channel. On the emoji set one flag drawn for two territories differs by 0.00 (France and Clipperton
Island, Norway's three, Australia and Heard & McDonald Islands), while the closest distinct emoji
differ by 1.2 (superhero and woman superhero) and two clock faces by about 2: the bound keeps every
emoji that is drawn differently and drops only repeats.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
from PIL import Image

from .shards import Sample

SIGNATURE_SIDE = 16
NEAR_DUPLICATE_MEAN_ABS = 0.5


def pixel_signature(image: Image.Image) -> np.ndarray:
    """The image's colour thumbnail, flattened, in grey levels (float32)."""
    thumb = image.convert("RGB").resize((SIGNATURE_SIDE, SIGNATURE_SIDE), Image.Resampling.BOX)
    return np.asarray(thumb, dtype=np.float32).reshape(-1)


def _is_near(signature: np.ndarray, pool: list[np.ndarray]) -> bool:
    """Whether ``signature`` nearly equals any signature of ``pool``."""
    return bool(pool) and float(np.abs(np.stack(pool) - signature).mean(axis=1).min()) < NEAR_DUPLICATE_MEAN_ABS


def near_duplicate_rows(held_out: Sequence[Image.Image], earlier: Sequence[Image.Image]) -> list[int]:
    """Rows of ``held_out`` that nearly repeat an image of ``earlier`` or a kept earlier row of their
    own list (the first of a repeated pair is kept)."""
    pool = [pixel_signature(image) for image in earlier]
    dropped = []
    for row, image in enumerate(held_out):
        signature = pixel_signature(image)
        if _is_near(signature, pool):
            dropped.append(row)
        else:
            pool.append(signature)
    return dropped


def _folded(text: str) -> str:
    """A caption as compared: lower case, single spaces."""
    return " ".join(text.lower().split())


def without_shared_captions(samples: Sequence[Sample]) -> tuple[list[Sample], list[str]]:
    """``samples`` with every caption that more than one of them holds removed (case and spacing
    aside) and each image's repeats of one caption kept once, and the removed shared captions; an
    image left with no caption is dropped too."""
    owners = Counter(c for s in samples for c in {_folded(c) for c in s.captions})
    kept = []
    for s in samples:
        own: dict[str, str] = {}
        for c in s.captions:
            own.setdefault(_folded(c), c)  # the first spelling of each caption
        captions = [c for folded, c in own.items() if owners[folded] == 1]
        if captions:
            kept.append(s._replace(captions=captions))
    return kept, sorted(c for c, n in owners.items() if n > 1)
