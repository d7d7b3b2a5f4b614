"""The image-text trainer's ``data`` section, plain data, and the checks it needs before any shard is
read: the bundled set's sizes, and whether two splits share a shard. No torch, PIL or webdataset
here, so the command line shows and checks the section before anything heavy loads; reading the
shards is :mod:`image_text.data.reading`.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from clipmag.config.checks import NonNegativeInt, PositiveInt, Seed
from clipmag.storage.shards import shard_fingerprint

BUNDLED = "bundled"  # data.train: the bundled digits set, as the text trainer names its own

__all__ = ["BUNDLED", "BundledDigits", "ClipDataConfig", "DigitsSizes", "split_overlap"]


@dataclass
class DigitsSizes:
    """The bundled set's sizes, one config section for the trainer (``data.bundled``) and the shard
    builder (``--bundled-train`` ...): composites per split (each with several captions) and the
    classification images per class. Every split is trained on, validated or tested, so none may be
    empty: an empty split has no pair to score, and is refused here rather than deep inside a run."""

    train: PositiveInt = 20000
    validation: PositiveInt = 500
    test: PositiveInt = 1000
    per_class: PositiveInt = 50

    def __post_init__(self) -> None:
        if self.validation + self.test > 10**4:
            raise ValueError(
                f"validation + test = {self.validation + self.test}: at most 10000 distinct four-digit composites exist"
            )


@dataclass
class BundledDigits(DigitsSizes):
    """The trainer's ``data.bundled`` section: the sizes, and the seed the set is drawn with (the shard
    builder takes its own ``--seed``)."""

    seed: Seed = 0


@dataclass
class ClipDataConfig:
    """Where batches come from. ``train``: ``bundled`` (the default) is the bundled set
    (``bundled.py``), which brings its validation and test splits and needs nothing else, as the
    text trainer's ``data.train=bundled`` does; else shards: a folder of ``*.tar`` or brace patterns
    (``data/train-{000..009}.tar``, ``::`` joins several into one set). ``validation`` and ``test``
    are lists of such sets, as in the text trainer, each scored apart under its folder's name; the
    first validation set picks the best checkpoint, the final numbers are on the test sets, so no two
    splits may share a shard. ``batch_size`` is per rank and micro-batch. ``augment`` uses open_clip's training
    transform (random resized crop) for shards, seeded per sample; the bundled set is always read
    un-augmented. ``workers``: DataLoader processes per rank (resume with the value the run started
    with). ``classnames`` / ``templates``: text files (one per line, templates with ``{c}``) that
    turn the ``cls`` field of the test shards into a zero-shot classification task. ``bundled``:
    sizes of the bundled splits and the seed they are drawn with (:class:`BundledDigits`).
    ``skip_corrupt``: a training image that does not decode is replaced by the next of its shard
    that does (counted in results) instead of stopping the run; evaluation images are never skipped
    (a test set must stay the same). The text trainer spells these settings alike.
    """

    batch_size: PositiveInt = 128
    eval_batch_size: PositiveInt = 256
    train: str = BUNDLED
    validation: list[str] = field(default_factory=list)
    test: list[str] = field(default_factory=list)
    classnames: str | None = None
    templates: str | None = None
    workers: NonNegativeInt = 0
    skip_corrupt: bool = False
    augment: bool = True
    bundled: BundledDigits = field(default_factory=BundledDigits)

    retired_keys: ClassVar[dict[str, str]] = {
        "source": "data.train=bundled names the bundled set, a shard folder or pattern names shards"
    }

    @property
    def is_bundled(self) -> bool:
        return self.train == BUNDLED


_OVERLAP_HARM = {
    ("train", "validation"): "validation would score data the model trained on",
    ("train", "test"): "the final numbers would score data the model trained on",
    ("validation", "test"): "validation would pick the checkpoint on the test data",
}


def split_overlap(splits: Mapping[str, Sequence[str]]) -> str | None:
    """The problem with two splits (their ``data`` keys ``train``, ``validation``, ``test`` -> their
    paths, in that order) that share a path, or None.

    Validation picks the checkpoint and test gives the final numbers, so no two may hold the same
    shard. Paths are compared resolved - ``..``, ``.`` and symbolic links followed - since
    ``data/../data/test`` and ``data/test`` are one folder however the settings spell it. The config
    compares the settings' folders (before any shard need exist), the task their shard files.
    """
    resolved = {split: {os.path.realpath(p): p for p in paths} for split, paths in splits.items()}
    for (a, files_a), (b, files_b) in itertools.combinations(resolved.items(), 2):
        shared = sorted(files_a.keys() & files_b.keys())
        if shared:
            spelled = {files_a[shared[0]], files_b[shared[0]]} - {shared[0]}
            named = f" (given as {' and '.join(sorted(spelled))})" if spelled else ""
            return f"data.{a} and data.{b} share {shared[0]}{named}: {_OVERLAP_HARM[a, b]}"
    return _content_overlap(splits)


def _content_overlap(splits: Mapping[str, Sequence[str]]) -> str | None:
    """Two splits holding byte copies of one shard under different paths (files only: the config's
    check runs before the shards exist)."""
    prints = {split: {shard_fingerprint(p): p for p in paths if os.path.isfile(p)} for split, paths in splits.items()}
    for (a, files_a), (b, files_b) in itertools.combinations(prints.items(), 2):
        shared = sorted(files_a.keys() & files_b.keys())
        if shared:
            return (
                f"data.{a} and data.{b} hold the same shard: {files_a[shared[0]]} and "
                f"{files_b[shared[0]]} have the same content: {_OVERLAP_HARM[a, b]}"
            )
    return None
