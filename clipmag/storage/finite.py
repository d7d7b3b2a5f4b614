"""No weights holding inf or nan are ever written: a checkpoint, an export or a served index made of
them would load without a word and score nonsense, and a resume from it would diverge at once. Every
writer of weights asks :func:`first_non_finite` (or :func:`require_finite`) before it opens a file."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from clipmag.errors import UserError

__all__ = ["NonFiniteWeights", "first_non_finite", "require_finite"]


class NonFiniteWeights(UserError):
    """Weights (or embeddings) holding inf or nan that a writer refused to write."""


def _local(tensor: torch.Tensor) -> torch.Tensor:
    """A sharded tensor's own part (each rank checks what it holds), else the tensor."""
    to_local = getattr(tensor, "to_local", None)
    return to_local() if callable(to_local) else tensor


def first_non_finite(tensors: Mapping[str, torch.Tensor]) -> str | None:
    """The name of the first floating-point tensor of ``tensors`` holding inf or nan, or ``None``."""
    for name, tensor in tensors.items():
        if isinstance(tensor, torch.Tensor) and (tensor.is_floating_point() or tensor.is_complex()):
            if not bool(torch.isfinite(_local(tensor).detach()).all()):
                return name
    return None


def require_finite(tensors: Mapping[str, torch.Tensor], what: str) -> None:
    """Refuse to write ``what`` (a file or folder, as the message names it) when a tensor is not finite."""
    name = first_non_finite(tensors)
    if name is not None:
        raise NonFiniteWeights(f"{what}: not written: tensor '{name}' holds inf or nan")
