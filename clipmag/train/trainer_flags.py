"""The command-line flags both trainers share, and the checks of their values beyond the key types.

Each flag is a shorthand for one dotted key and means the same in the text and the image-text
trainer: the keys live in the shared sections (``head``, ``loss``, ``optim``, ``train``) or, for
``--batch-size``, in both front ends' ``data`` section, so their types and ranges are alike too.
``--model`` and ``--objective`` are shared by name: each front end points them at the keys its
config calls its model and its objective (if it has a choice of either). A flag for a new shared key goes into
``SHARED_TRAINER_FLAGS``; a front end's own shorthands are passed to :func:`trainer_flags`.
"""

from __future__ import annotations

__all__ = ["SHARED_TRAINER_FLAGS", "trainer_flags", "in_batch_problem"]

SHARED_TRAINER_FLAGS: dict[str, str] = {
    "norm": "head.name",
    "direction": "loss.direction",
    "batch_size": "data.batch_size",
    "steps": "train.steps",
    "lr": "optim.lr",
    "seed": "train.seed",
    "precision": "train.precision",
    "output": "train.output_dir",
    "resume": "train.resume",
    "overwrite": "train.overwrite",
}


def trainer_flags(model: str | None = None, objective: str | None = None, **own: str) -> dict[str, str]:
    """A trainer's flags (flag -> dotted key): ``--model`` and ``--objective`` set the keys ``model``
    and ``objective`` name, the shared flags their keys, and ``own`` the front end's other flags. A
    front end with no choice of model or of objective names no key, and has no such flag."""
    chosen = {flag: key for flag, key in (("model", model), ("objective", objective)) if key is not None}
    return {**chosen, **SHARED_TRAINER_FLAGS, **own}


def in_batch_problem(batch_size: int, hard_negatives: int = 0) -> str | None:
    """Why a contrastive batch cannot train (None: it can): InfoNCE needs a second candidate per
    query, another row of the batch or a hard negative."""
    if batch_size < 2 and hard_negatives == 0:
        return f"data.batch_size must be >= 2 for in-batch negatives (or give hard negatives), got {batch_size}"
    return None
