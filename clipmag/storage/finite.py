"""No number holding inf or nan is ever written: a checkpoint, an export, a head record or a served
index made of them would load without a word and score nonsense, and a resume from it would diverge
at once. Every writer asks :func:`first_non_finite` (or :func:`require_finite`) before it opens a
file, about every number it writes - the tensors and the plain numbers beside them (a head record's
scale, a checkpoint's trainer state) alike."""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from typing import Any

from clipmag.errors import UserError

__all__ = ["NonFiniteWeights", "first_non_finite", "require_finite"]


class NonFiniteWeights(UserError):
    """Weights, embeddings or numbers holding inf or nan that a writer refused to write."""


def _local(tensor: Any) -> Any:
    """A sharded tensor's own part (each rank checks what it holds), else the tensor."""
    to_local = getattr(tensor, "to_local", None)
    return to_local() if callable(to_local) else tensor


def _finite_tensor(value: Any) -> bool | None:
    """Whether ``value``, a floating-point tensor, is finite; None when it is no such tensor. torch
    is not imported for this: a value can only be a tensor once something else imported it."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(value, torch.Tensor):
        return None
    if not (value.is_floating_point() or value.is_complex()):
        return True
    return bool(torch.isfinite(_local(value).detach()).all())


def _non_finite(value: Any, name: str) -> tuple[str, str] | None:
    """``(kind, name)`` of the first non-finite number under ``value`` (named by ``name``, dotted
    through mappings and indexed through lists), or None."""
    if isinstance(value, float):
        return None if math.isfinite(value) else ("value", name)
    if isinstance(value, Mapping):
        items: Any = ((f"{name}.{key}" if name else str(key), item) for key, item in value.items())
    elif isinstance(value, (list, tuple)):
        items = ((f"{name}[{index}]", item) for index, item in enumerate(value))
    else:
        finite = _finite_tensor(value)
        return ("tensor", name) if finite is False else None
    for inner_name, item in items:
        found = _non_finite(item, inner_name)
        if found is not None:
            return found
    return None


def first_non_finite(values: Mapping[str, Any]) -> str | None:
    """The name of the first floating-point tensor or number in ``values`` (a state dict, a record;
    nested names are dotted: ``head.scale``) holding inf or nan, or ``None``."""
    found = _non_finite(values, "")
    return None if found is None else found[1]


def require_finite(values: Mapping[str, Any], what: str) -> None:
    """Refuse to write ``what`` (a file or folder, as the message names it) when a tensor or number in
    ``values`` is not finite."""
    found = _non_finite(values, "")
    if found is not None:
        kind, name = found
        raise NonFiniteWeights(f"{what}: not written: {kind} '{name}' holds inf or nan")
