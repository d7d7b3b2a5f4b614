"""Dropout on the CPU from raw random bits: torch's semantics at a fraction of its RNG cost.

Profiling the text trainer's step on a CPU (``benchmarks/profile_step.py``) found torch's CPU
dropout drawing one call of its random generator per element (``aten::bernoulli_``): up to a fifth
of a bf16 step, most of it on the attention probabilities. A keep-mask needs far less randomness:
here every element gets 32 random bits, drawn 64 at a time by ``Tensor.random_`` over the full
int64 range, and is kept when those bits (read as a signed int32) reach a threshold, so
P(drop) = p to within 2^-32.

Everything else is torch's dropout: kept values are scaled by 1/(1-p), the backward pass reuses
the forward mask (kept as bool, one byte per element, as torch keeps its own), ``p=0`` and eval
mode return the input itself without drawing. The bits come from the default CPU generator, so
``torch.manual_seed``, a checkpoint's saved RNG state, gradient caching's and gradient
checkpointing's replays all reproduce the masks; they are other masks than torch's, so a run with
this dropout is not bitwise the run with torch's. On CUDA torch's own dropout is fast and is used.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["FastDropout", "fast_dropout", "keep_mask", "swap_dropout_layers"]

_INT32_SPAN = 1 << 32
_INT32_MAX = (1 << 31) - 1


def keep_mask(shape: torch.Size | tuple[int, ...], p: float) -> torch.Tensor:
    """A bool mask of ``shape`` from the default CPU generator, each element False with probability ``p``.

    Each element takes 32 bits of an int64 drawn over its full range; it is dropped when those bits,
    as a signed int32 u (uniform on [-2^31, 2^31)), fall below t = round(p * 2^32) - 2^31."""
    count = math.prod(shape)
    bits = torch.empty((count + 1) // 2, dtype=torch.int64).random_(-(1 << 63), None)
    threshold = min(round(p * _INT32_SPAN) - (1 << 31), _INT32_MAX)
    return bits.view(torch.int32)[:count].view(shape) >= threshold


def _apply(x: torch.Tensor, mask: torch.Tensor, scale: float) -> torch.Tensor:
    """``x * mask * scale`` in two passes over ``x``: selecting by the bool mask reads it as it is,
    where multiplying by it would first copy it into a tensor of ``x``'s dtype."""
    return torch.where(mask, x, 0).mul_(scale)


class _MaskedScale(torch.autograd.Function):
    """``x * mask / (1-p)`` with a fresh mask, and the same mask applied to the gradient."""

    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, x: torch.Tensor, p: float) -> torch.Tensor:
        mask = keep_mask(x.shape, p)
        ctx.save_for_backward(mask)
        ctx.scale = 1.0 / (1.0 - p)
        return _apply(x, mask, ctx.scale)

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        (mask,) = ctx.saved_tensors
        return _apply(grad, mask, ctx.scale), None


def fast_dropout(x: torch.Tensor, p: float, training: bool = True) -> torch.Tensor:
    """``F.dropout(x, p, training)`` with masks from raw random bits for a CPU tensor; any other
    device, and ``p >= 1`` (everything dropped), go to torch's own dropout."""
    if not training or p == 0:
        return x
    if x.device.type != "cpu" or p >= 1:
        return F.dropout(x, p, training)
    return _MaskedScale.apply(x, p)


class FastDropout(nn.Dropout):
    """``nn.Dropout`` that draws its masks with :func:`fast_dropout`. A subclass, so whatever finds
    and sets dropout layers (``clipmag.train.dropout``) and a model reading ``layer.p`` still work.
    It never works in place: the mask is applied to a new tensor, as autograd needs the input."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return fast_dropout(x, self.p, self.training)


def swap_dropout_layers(model: nn.Module) -> int:
    """Replace every plain ``nn.Dropout`` of ``model`` by a :class:`FastDropout` of the same
    probability and mode (a layer shared by several parents stays shared); returns how many.
    Channel-wise and alpha dropouts drop other things than single elements and stay as they are."""
    replaced: dict[int, FastDropout] = {}
    found = [
        (parent, name, child)
        for parent in model.modules()
        for name, child in parent.named_children()
        if type(child) is nn.Dropout
    ]
    for parent, name, child in found:
        if id(child) not in replaced:
            replaced[id(child)] = FastDropout(child.p, child.inplace).train(child.training)
        setattr(parent, name, replaced[id(child)])
    return len(replaced)
