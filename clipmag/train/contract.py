"""What a front end gives the core: a ``Task`` (data, evaluation, export) whose ``build_model``
returns a ``ContrastiveModel``.

The contract is written here once, for the people who add a front end (docs/architecture.md walks
through one): every member the loop (``engine.py``, ``train_step.py``), gradient caching
(``grad_cache.py``), FSDP (``sharding.py``), checkpoints, the export and the evaluations use. The
engine checks a built model against it before anything else happens (:func:`checked_model`), so a
missing member is one line naming the front end and the member, not an ``AttributeError`` from the
middle of the first step or a ``NotImplementedError`` at the first chunked batch.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import nn

from clipmag.errors import UserError
from clipmag.scoring.head_record import HeadRecord
from clipmag.scoring.heads import SimilarityHead
from clipmag.scoring.losses import InfoNCE

__all__ = ["ContrastiveModel", "Task", "ModelContractError", "MODEL_METHODS", "checked_model"]


class ContrastiveModel(Protocol):
    """A front end's trainable model: an ``nn.Module`` holding every trainable parameter (encoders,
    head, loss scale), with these members.

    ``head`` and ``loss``: the model owns its similarity head and passes it to its ``InfoNCE`` at
    every call (one head object, one owner); the loop logs ``head.gammas()`` and calls
    ``loss.clamp_scale_()`` after every optimizer step. ``forward(batch)`` equals
    ``loss_from(batch, tuple(embed_parts(batch)))``. The weights round-trip through ``state_dict``
    / ``load_state_dict`` (checkpoints, resume, the best checkpoint); under ``train.strategy=fsdp``
    the blocks sharded one by one are the classes a Hugging Face submodule lists in
    ``_no_split_modules``, else open_clip's ``ResidualAttentionBlock`` (``sharding.py``). The task's
    ``export`` writes the weights with ``head_record()`` beside them, so every loader rebuilds the
    head the model trained with.
    """

    head: SimilarityHead
    loss: InfoNCE

    def __call__(self, batch: Any) -> dict[str, Any]:
        """The loss (mean over this rank's rows) and detached scalar statistics (``forward``)."""

    def head_record(self) -> HeadRecord:
        """The head, the loss direction and scale, the sides: what checkpoints and exports record."""

    def chunks(self, batch: Any, size: int) -> Sequence[Any]:
        """``batch`` cut into consecutive pieces of ``size`` rows; each piece carries its rows'
        hard negatives, so the pieces' embeddings concatenate to the batch's (gradient caching)."""

    def embed_parts(self, batch: Any) -> Iterator[torch.Tensor]:
        """Every embedding the loss needs, one at a time in a fixed order (e.g. queries, then
        documents), each with the batch's rows as its first dimension. A generator: the next part
        is computed only when asked for, after the previous one has been back-propagated."""

    def loss_from(self, batch: Any, embeddings: tuple[torch.Tensor, ...]) -> dict[str, Any]:
        """The loss and statistics of ``batch`` from its embeddings (as ``forward`` returns them)."""


# The methods checked on every built model (forward: its own, not nn.Module's placeholder).
MODEL_METHODS = ("forward", "head_record", "chunks", "embed_parts", "loss_from")


class Task(Protocol):
    """What a front end provides to the loop (``clipmag.train.run.RunTask`` adds the test phase)."""

    front_end: str
    primary_metric: str | None

    def build_model(self) -> ContrastiveModel:
        """The model to train, with its head; the engine checks it (:func:`checked_model`)."""

    def run_identity(self) -> dict[str, Any]:
        """What makes this run this run beside its config (e.g. the objective and the model name):
        a checkpoint to resume must match it; ``results.json`` records it under ``run``."""

    def train_batches(self, start_step: int) -> Iterator[Any]:
        """Endless, deterministic stream of this rank's micro-batches from micro-batch ``start_step``."""

    def local_batch_size(self) -> int:
        """Samples per micro-batch on one rank."""

    def evaluate(self, model: nn.Module) -> dict[str, float]:
        """Validation metrics (rank 0, unwrapped model in eval mode, no grad)."""

    def export(self, model: nn.Module, directory: Path) -> None:
        """Write the final model with its head (``model.head_record()``) to ``directory`` (rank 0)."""


class ModelContractError(UserError, TypeError):
    """A front end's model lacks what the core needs; the message names the front end and the member."""


def _missing(model: Any) -> list[str]:
    missing = [name for name in MODEL_METHODS if not callable(getattr(model, name, None))]
    if "forward" not in missing and type(model).forward is nn.Module.forward:
        missing.insert(0, "forward")
    if not isinstance(getattr(model, "head", None), SimilarityHead):
        missing.append("head (a SimilarityHead)")
    if not callable(getattr(getattr(model, "loss", None), "clamp_scale_", None)):
        missing.append("loss.clamp_scale_ (an InfoNCE)")
    return missing


def checked_model(model: Any, front_end: str) -> ContrastiveModel:
    """``model`` itself when it has every member of :class:`ContrastiveModel`; else one error line
    naming the front end and what its model lacks."""
    if not isinstance(model, nn.Module):
        raise ModelContractError(
            f"front end {front_end!r}: build_model returned {type(model).__name__}, not a torch.nn.Module "
            "(see ContrastiveModel in clipmag/train/contract.py)"
        )
    missing = _missing(model)
    if missing:
        raise ModelContractError(
            f"front end {front_end!r}: its model {type(model).__name__} lacks {', '.join(missing)} "
            "(see ContrastiveModel in clipmag/train/contract.py and docs/architecture.md)"
        )
    return model
