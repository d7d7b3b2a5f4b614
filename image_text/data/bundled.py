"""The bundled image-text set: composites of real handwritten digits with several captions each.

Why this set. The default run must train offline on a fresh machine in minutes, yet retrieval has to
mean something in *both* directions and follow the COCO protocol (several captions per image): a
caption must pick out one image, and an image must be found from any of its captions. Single digits
with captions like "a 3" would give ten distinct captions and make text->image retrieval a coin toss
among hundreds of identical texts. Composites fix that.

How it is built (deterministic in ``seed``):
1. Images come from scikit-learn's bundled handwritten digits (``sklearn.datasets.load_digits``,
   1,797 real 8x8 scans from UCI, 17 grey levels; shipped inside the wheel, no download).
2. The scans are split *before* composing: a seeded, class-stratified train / validation / test
   split (70 / 10 / 20), so no validation or test composite reuses a scan seen in training, and the
   validation composites (used to pick the best checkpoint) share no scan with the test ones.
3. Each sample is a 2 x 2 grid of four scans (a 16 x 16 grey image, returned as RGB so open_clip's
   transforms apply unchanged) with ``len(CAPTION_TEMPLATES)`` captions: the same four digits in
   different templates and orders (``"top left 3, top right 7, bottom left 1, bottom right 0"``,
   ``"bottom right 0, bottom left 1, top right 7, top left 3"``, ``"3 and 7 on top, 1 and 0 below"``,
   ...), as COCO gives five captions per image. Training draws one of them per image per epoch.
4. Train composites draw their four digit classes uniformly (10^4 possible digit tuples); validation
   and test composites use *distinct* tuples (none shared between the two), so every evaluation
   caption names exactly one image of its split.
5. A zero-shot classification split: grids whose four cells show (independently drawn) test scans
   of one class, labelled with that class, scored against ``TEMPLATES`` filled with ``CLASSNAMES``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from PIL import Image

from .config import DigitsSizes

POSITIONS: tuple[str, ...] = ("top left", "top right", "bottom left", "bottom right")
# {0}..{3}: the digits in POSITIONS order; the first template is the canonical caption.
CAPTION_TEMPLATES: tuple[str, ...] = (
    "top left {0}, top right {1}, bottom left {2}, bottom right {3}",
    "bottom right {3}, bottom left {2}, top right {1}, top left {0}",
    "{0} and {1} on top, {2} and {3} below",
    "left column {0} over {2}, right column {1} over {3}",
    "reading order: {0} {1} {2} {3}",
)
CLASSNAMES: tuple[str, ...] = tuple(str(d) for d in range(10))
TEMPLATES: tuple[str, ...] = tuple(t.format(*["{c}"] * len(POSITIONS)) for t in CAPTION_TEMPLATES)
SPLIT_FRACTIONS = (0.1, 0.2)  # validation, test: fractions of each class's scans
CELL = 8


def captions_for(digits: tuple[int, ...] | list[int]) -> list[str]:
    """Every caption of a composite whose cells (in ``POSITIONS`` order) show ``digits``."""
    return [t.format(*digits) for t in CAPTION_TEMPLATES]


@dataclass
class CompositeSplit:
    """One split: ``images`` uint8 [N, 16, 16], ``digits`` int [N, 4], ``labels`` [N] (-1 if none)."""

    images: np.ndarray
    digits: np.ndarray
    labels: np.ndarray

    def __len__(self) -> int:
        return len(self.digits)

    @property
    def captions(self) -> list[list[str]]:
        """All captions of each image, canonical first."""
        return [captions_for(row) for row in self.digits.tolist()]

    def pil(self, index: int) -> Image.Image:
        """Sample ``index`` as an RGB PIL image (what open_clip's transforms expect)."""
        return Image.fromarray(self.images[index], mode="L").convert("RGB")

    def caption_tokens(self, tokenizer: Callable) -> torch.Tensor:
        """Tokens of every caption, [N, len(CAPTION_TEMPLATES), context length].

        Tokenizing 100k short captions one by one takes seconds on a CPU; every caption here is a
        template with single-digit slots, so each template is tokenized once and the digit tokens
        are written into their slots. The result is checked against the tokenizer on every uniform
        filling; a tokenizer that merges a digit with its neighbours gets the captions one by one.
        """
        if not _slots_hold(self.digits[:1], tokenizer):
            flat = tokenizer([c for captions in self.captions for c in captions])
            return flat.view(len(self), len(CAPTION_TEMPLATES), -1)
        return torch.stack([_template_tokens(t, self.digits, tokenizer) for t in CAPTION_TEMPLATES], dim=1)


def _digit_tokens(tokenizer: Callable) -> torch.Tensor:
    """The token id of each digit 0-9 (the one after the start token)."""
    return tokenizer([str(d) for d in range(10)])[:, 1]


def _template_tokens(template: str, digits: np.ndarray, tokenizer: Callable) -> torch.Tensor:
    """[N, L]: ``template`` filled with each row of ``digits`` by writing digit tokens into slots.
    The slots are found by filling position p with the digit p + 1 (distinct, and absent from the
    template's words)."""
    marked = tokenizer([template.format(*range(1, len(POSITIONS) + 1))])[0]
    ids = _digit_tokens(tokenizer)
    out = marked.repeat(len(digits), 1)
    table = ids[torch.as_tensor(digits, dtype=torch.long)]
    for position in range(len(POSITIONS)):
        slots = marked == ids[position + 1]
        out[:, slots] = table[:, position : position + 1]
    return out


def _slots_hold(extra: np.ndarray, tokenizer: Callable) -> bool:
    """Whether slot filling equals the tokenizer itself on every uniform filling and ``extra`` rows."""
    probe = np.concatenate([np.repeat(np.arange(10)[:, None], len(POSITIONS), axis=1), extra.reshape(-1, 4)])
    direct = tokenizer([c for row in probe.tolist() for c in captions_for(row)])
    filled = torch.stack([_template_tokens(t, probe, tokenizer) for t in CAPTION_TEMPLATES], dim=1)
    return torch.equal(direct.view(filled.shape), filled)


@dataclass
class BundledDigits:
    train: CompositeSplit
    val: CompositeSplit
    test: CompositeSplit
    classification: CompositeSplit


def _load_scans() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    digits = load_digits()
    scans = np.rint(digits.images * (255.0 / 16.0)).clip(0, 255).astype(np.uint8)
    return scans, digits.target.astype(np.int64)


def _split_scans(labels: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Class-stratified (train, validation, test) scan indices; at least 4 per class held out."""
    train, val, test = [], [], []
    for cls in range(10):
        idx = rng.permutation(np.flatnonzero(labels == cls))
        n_val, n_test = (max(4, int(round(len(idx) * f))) for f in SPLIT_FRACTIONS)
        val.append(idx[:n_val])
        test.append(idx[n_val : n_val + n_test])
        train.append(idx[n_val + n_test :])
    return np.concatenate(train), np.concatenate(val), np.concatenate(test)


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
    lab = np.full(len(classes), -1, dtype=np.int64) if label is None else label
    return CompositeSplit(_compose(scans, cells), classes.astype(np.int64), lab)


def _as_digits(codes: np.ndarray) -> np.ndarray:
    return np.stack([(codes // 10 ** (3 - k)) % 10 for k in range(4)], axis=1)


def build_sized(sizes: DigitsSizes, seed: int) -> BundledDigits:
    """The bundled set at the sizes of a config section (``data.bundled``, ``--bundled-train`` ...)."""
    return build_bundled(sizes.train, sizes.validation, sizes.test, sizes.per_class, seed=seed)


def build_bundled(
    n_train: int = 20000, n_val: int = 500, n_test: int = 1000, n_per_class: int = 50, seed: int = 0
) -> BundledDigits:
    """Build the four splits; the same arguments always give the same arrays."""
    if n_val + n_test > 10**4:
        raise ValueError(f"n_val + n_test = {n_val + n_test}: at most 10000 distinct four-digit tuples exist")
    # one independent stream per split: the evaluation sets do not change with the training-set size
    streams = np.random.SeedSequence(seed).spawn(6)
    rng_scans, rng_train, rng_codes, rng_test, rng_cls, rng_val = (np.random.default_rng(s) for s in streams)
    scans, labels = _load_scans()
    train_pool, val_pool, test_pool = _split_scans(labels, rng_scans)
    train_classes = rng_train.integers(0, 10, size=(n_train, 4))
    codes = rng_codes.permutation(10**4)  # test tuples first: the test set does not change with n_val
    cls_labels = np.repeat(np.arange(10), n_per_class)
    cls_classes = np.repeat(cls_labels[:, None], 4, axis=1)
    return BundledDigits(
        train=_make_split(scans, labels, train_pool, train_classes, rng_train),
        val=_make_split(scans, labels, val_pool, _as_digits(codes[n_test : n_test + n_val]), rng_val),
        test=_make_split(scans, labels, test_pool, _as_digits(codes[:n_test]), rng_test),
        classification=_make_split(scans, labels, test_pool, cls_classes, rng_cls, label=cls_labels),
    )
