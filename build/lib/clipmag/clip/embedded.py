"""The embedded image-text set: composites of real handwritten digits with positional captions.

Why this set. The default run must train offline on a fresh machine in minutes, yet retrieval has to
mean something in *both* directions: a caption must pick out one image and an image one caption.
Single digits with captions like "a 3" would give ten distinct captions and make text->image
retrieval a coin toss among hundreds of identical texts. Composites fix that.

How it is built (deterministic in ``seed``):
1. Images come from scikit-learn's bundled handwritten digits (``sklearn.datasets.load_digits``,
   1,797 real 8x8 scans from UCI, 17 grey levels; shipped inside the wheel, no download).
2. The scans are split *before* composing: a seeded, class-stratified 80 / 20 split, so no test
   composite reuses a scan seen in training.
3. Each sample is a 2 x 2 grid of four scans (a 16 x 16 grey image, returned as RGB so open_clip's
   transforms apply unchanged) and its caption names every digit with its position, always in the
   same order: ``"top left 3, top right 7, bottom left 1, bottom right 0"``.
4. Train composites draw their four digit classes uniformly (10^4 possible captions, so most
   captions are unique); test composites use *distinct* class tuples, so every test caption is
   unique and index matching is exact.
5. A zero-shot classification split: grids whose four cells show (independently drawn) scans of one class,
   labelled with that class, scored against the template ``TEMPLATES`` filled with ``CLASSNAMES``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image

POSITIONS: tuple[str, ...] = ("top left", "top right", "bottom left", "bottom right")
CLASSNAMES: tuple[str, ...] = tuple(str(d) for d in range(10))
TEMPLATES: tuple[str, ...] = ("top left {c}, top right {c}, bottom left {c}, bottom right {c}",)
CELL = 8


def caption_for(digits: tuple[int, ...] | list[int]) -> str:
    """The caption of a composite whose cells (in ``POSITIONS`` order) show ``digits``."""
    return ", ".join(f"{pos} {d}" for pos, d in zip(POSITIONS, digits))


@dataclass
class CompositeSplit:
    """One split: ``images`` uint8 [N, 16, 16], ``captions`` [N], ``digits`` int [N, 4], ``labels`` [N] (-1 if none)."""

    images: np.ndarray
    captions: list[str]
    digits: np.ndarray
    labels: np.ndarray

    def __len__(self) -> int:
        return len(self.captions)

    def pil(self, index: int) -> Image.Image:
        """Sample ``index`` as an RGB PIL image (what open_clip's transforms expect)."""
        return Image.fromarray(self.images[index], mode="L").convert("RGB")


@dataclass
class EmbeddedDigits:
    train: CompositeSplit
    test: CompositeSplit
    classification: CompositeSplit


def _load_scans() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    digits = load_digits()
    scans = np.rint(digits.images * (255.0 / 16.0)).clip(0, 255).astype(np.uint8)
    return scans, digits.target.astype(np.int64)


def _split_scans(labels: np.ndarray, rng: np.random.Generator, test_fraction: float) -> tuple[np.ndarray, np.ndarray]:
    train, test = [], []
    for cls in range(10):
        idx = rng.permutation(np.flatnonzero(labels == cls))
        n_test = max(4, int(round(len(idx) * test_fraction)))
        test.append(idx[:n_test])
        train.append(idx[n_test:])
    return np.concatenate(train), np.concatenate(test)


def _compose(scans: np.ndarray, cells: np.ndarray) -> np.ndarray:
    """cells [N, 4] of scan indices -> uint8 [N, 16, 16] grids in POSITIONS order."""
    tiles = scans[cells]  # [N, 4, 8, 8]
    top = np.concatenate([tiles[:, 0], tiles[:, 1]], axis=2)
    bottom = np.concatenate([tiles[:, 2], tiles[:, 3]], axis=2)
    return np.ascontiguousarray(np.concatenate([top, bottom], axis=1))


def _pick_scans(pool: np.ndarray, labels: np.ndarray, classes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """For each requested class, a random scan of that class from ``pool``."""
    by_class = [pool[labels[pool] == c] for c in range(10)]
    out = np.empty(classes.shape, dtype=np.int64)
    for c in range(10):
        mask = classes == c
        out[mask] = rng.choice(by_class[c], size=int(mask.sum()))
    return out


def _make_split(scans, labels, pool, classes, rng, label=None) -> CompositeSplit:
    cells = _pick_scans(pool, labels, classes, rng)
    captions = [caption_for(row) for row in classes.tolist()]
    lab = np.full(len(classes), -1, dtype=np.int64) if label is None else label
    return CompositeSplit(_compose(scans, cells), captions, classes.astype(np.int64), lab)


def build_embedded(
    n_train: int = 20000, n_test: int = 1000, n_per_class: int = 50, seed: int = 0, test_fraction: float = 0.2
) -> EmbeddedDigits:
    """Build the three splits; the same arguments always give the same arrays."""
    if n_test > 10**4:
        raise ValueError(f"n_test={n_test}: at most 10000 distinct four-digit captions exist")
    # one independent stream per split: the test sets do not change with the training-set size
    rng_scans, rng_train, rng_test, rng_cls = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(4))
    scans, labels = _load_scans()
    train_pool, test_pool = _split_scans(labels, rng_scans, test_fraction)
    train_classes = rng_train.integers(0, 10, size=(n_train, 4))
    test_codes = rng_test.choice(10**4, size=n_test, replace=False)
    test_classes = np.stack([(test_codes // 10 ** (3 - k)) % 10 for k in range(4)], axis=1)
    cls_labels = np.repeat(np.arange(10), n_per_class)
    cls_classes = np.repeat(cls_labels[:, None], 4, axis=1)
    train = _make_split(scans, labels, train_pool, train_classes, rng_train)
    test = _make_split(scans, labels, test_pool, test_classes, rng_test)
    cls_split = _make_split(scans, labels, test_pool, cls_classes, rng_cls, label=cls_labels)
    return EmbeddedDigits(train, test, cls_split)
