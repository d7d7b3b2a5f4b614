"""The command-line flags both trainers share, and the checks of their values beyond the key types.

Each flag is a shorthand for one dotted key and means the same in the text and the image-text
trainer: both trainers spell a shared setting alike (``model.name``, ``objective``, ``data.train``,
...; the old spellings are :data:`clipmag.config.spellings.TRAINER_KEYS`), and the keys live in the
shared sections (``head``, ``loss``, ``optim``, ``train``) or in both front ends' ``model`` and
``data`` sections, so their types and ranges are alike where the setting is. A flag for a shared
key goes into ``SHARED_TRAINER_FLAGS``, never into one trainer alone; a front end's own shorthands
(keys the other trainer has not) are passed to :func:`trainer_flags`.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["SHARED_TRAINER_FLAGS", "FRONT_END_VALUES", "trainer_flags", "in_batch_problem"]

SHARED_TRAINER_FLAGS: dict[str, str] = {
    "model": "model.name",
    "init": "model.init",
    "objective": "objective",
    "train": "data.train",
    "validation": "data.validation",
    "test": "data.test",
    "norm": "head.name",
    "direction": "loss.direction",
    "siglip": "loss.kind=siglip",
    "batch_size": "data.batch_size",
    "steps": "train.steps",
    "lr": "optim.lr",
    "seed": "train.seed",
    "precision": "train.precision",
    "no_fast_dropout": "train.fast_dropout=false",
    "output": "train.output_dir",
    "resume": "train.resume",
    "overwrite": "train.overwrite",
}

# The shared flags whose values are each front end's own (its models, its objectives, its data: a
# text trainer's test sets are a list, an image-text trainer's test shards one pattern); every other
# shared flag sets a key of one type and range in both.
FRONT_END_VALUES = ("model", "init", "objective", "train", "validation", "test")


def trainer_flags(without: Sequence[str] = (), **own: str) -> dict[str, str]:
    """A trainer's flags (flag -> dotted key, or the one ``key=value`` a switch stands for): the
    shared flags, then ``own``, the front end's flags for keys only it has. ``without`` names the
    shared flags of :data:`FRONT_END_VALUES` a front end has no key for (one with no choice of model
    or of objective, say): it has no such flag, rather than one that sets a key it lacks."""
    shared = sorted(set(own) & set(SHARED_TRAINER_FLAGS))
    if shared:
        raise ValueError(f"trainer_flags: --{shared[0]} is a shared flag; a front end does not set it again")
    if unknown := sorted(set(without) - set(FRONT_END_VALUES)):
        raise ValueError(f"trainer_flags: --{unknown[0]} sets a key every front end has; it cannot be left out")
    return {**{flag: key for flag, key in SHARED_TRAINER_FLAGS.items() if flag not in without}, **own}


def in_batch_problem(batch_size: int, hard_negatives: int = 0) -> str | None:
    """Why a contrastive batch cannot train (None: it can): InfoNCE needs a second candidate per
    query, another row of the batch or a hard negative."""
    if batch_size < 2 and hard_negatives == 0:
        return f"data.batch_size must be >= 2 for in-batch negatives (or give hard negatives), got {batch_size}"
    return None
