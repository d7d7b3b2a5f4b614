"""Fast dropout (``clipmag.train.dropout.fast``) in a Hugging Face transformer: its dropout layers
and the dropout of its attention probabilities.

The layers are swapped in place. The attention dropout is not a layer call: the model passes its
probability as ``dropout=`` to the attention function its config names, and with dropout above 0
torch's SDPA on the CPU takes its math path anyway, drawing a torch mask over every attention
probability (batch x heads x length^2 elements, the bulk of a step's dropout). So a clipmag
attention function is registered with transformers' ``AttentionInterface``: with dropout above 0
on the CPU it computes softmax(q k^T * scaling + mask), drops with the fast dropout, then
multiplies by v, as torch's math path does (in bf16 the two products run as autocast has them, the
softmax in fp32); everything else (no dropout, evaluation, CUDA, causal attention without a mask,
position biases, soft-capping, attention sinks) calls transformers' own ``sdpa`` function, so
those results are the ones ``sdpa`` gives. It is set with ``set_attn_implementation`` on models
whose attention was ``sdpa`` or ``eager`` and that can switch; other models keep theirs.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from clipmag.runtime.logs import logger
from clipmag.train.dropout.fast import fast_dropout, swap_dropout_layers

__all__ = ["ATTENTION_NAME", "fast_dropout_attention", "use_fast_dropout"]

ATTENTION_NAME = "clipmag_sdpa"  # contains "sdpa": transformers checks the model supports SDPA before setting it
SWITCHABLE = ("sdpa", "eager")
_SDPA_ONLY_KWARGS = ("position_bias", "softcap", "s_aux")  # features the math path here does not implement


def _sdpa() -> Any:
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    return ALL_ATTENTION_FUNCTIONS["sdpa"]


def _takes_math_path(module: nn.Module, query: torch.Tensor, mask: Any, dropout: float, kwargs: dict) -> bool:
    """Whether this call drops attention on the CPU with nothing but a mask to apply (``sdpa``
    handles the rest). Causality is resolved as transformers' ``sdpa`` resolves it: without a mask
    a causal module needs SDPA's ``is_causal``, which the math path here does not build."""
    if dropout == 0 or query.device.type != "cpu" or mask is not None and not isinstance(mask, torch.Tensor):
        return False
    causal = kwargs.get("is_causal")
    causal = getattr(module, "is_causal", True) if causal is None else causal
    if query.shape[2] > 1 and mask is None and causal:
        return False
    return all(kwargs.get(name) is None for name in _SDPA_ONLY_KWARGS)


def _dropped_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None,
    dropout: float,
    scaling: float | None,
) -> torch.Tensor:
    """softmax(q k^T * scaling + mask), dropped, times v; [batch, length, heads, dim] as ``sdpa`` returns.
    A bool mask keeps where True; a masked score becomes the dtype's lowest number, as in
    transformers' eager masks, so a row with nothing to attend averages instead of giving NaN."""
    groups = query.shape[1] // key.shape[1]
    if groups > 1:  # grouped-query attention: each key/value head serves that many query heads
        key, value = key.repeat_interleave(groups, dim=1), value.repeat_interleave(groups, dim=1)
    scale = query.shape[-1] ** -0.5 if scaling is None else scaling
    # the scale goes on the queries (length x dim) rather than the scores (length x length), and the
    # mask is applied in place: the scores are a fresh product that backward does not keep
    scores = torch.matmul(query * scale, key.transpose(-2, -1))
    if mask is not None:
        scores = (
            scores.masked_fill_(~mask, torch.finfo(scores.dtype).min) if mask.dtype == torch.bool else scores.add_(mask)
        )
    # The CPU softmax accumulates bf16 in fp32 and rounds once at the end, which is what an fp32
    # softmax cast back to bf16 gives, without the two full-size casts autocast would add around it.
    with torch.autocast(scores.device.type, enabled=False):
        probs = torch.softmax(scores, dim=-1).to(value.dtype)
    return torch.matmul(fast_dropout(probs, dropout), value).transpose(1, 2).contiguous()


def fast_dropout_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """The attention function registered as :data:`ATTENTION_NAME` (transformers' signature)."""
    if _takes_math_path(module, query, attention_mask, dropout, kwargs):
        return _dropped_attention(query, key, value, attention_mask, dropout, scaling), None
    return _sdpa()(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs)


def _register() -> bool:
    """Register the attention function and its mask (``sdpa``'s) with transformers; False where
    transformers predates its attention and mask interfaces (4.53), so nothing can be set."""
    try:
        from transformers import AttentionInterface, AttentionMaskInterface
        from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS
    except ImportError:
        return False
    AttentionInterface.register(ATTENTION_NAME, fast_dropout_attention)
    AttentionMaskInterface.register(ATTENTION_NAME, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])
    return True


def _use_fast_attention(model: nn.Module) -> bool:
    """Set :data:`ATTENTION_NAME` on a Hugging Face model whose attention was ``sdpa`` or ``eager``
    and that can switch; whether it is now set."""
    config = getattr(model, "config", None)
    if getattr(config, "_attn_implementation", None) not in SWITCHABLE or not hasattr(model, "set_attn_implementation"):
        return False
    can_switch = getattr(type(model), "_can_set_attn_implementation", None)
    if (can_switch is not None and not can_switch()) or not _register():
        return False
    try:
        model.set_attn_implementation(ATTENTION_NAME)
    except (ValueError, ImportError):  # the model cannot run SDPA (transformers says why)
        return False
    return config._attn_implementation == ATTENTION_NAME


def use_fast_dropout(model: nn.Module) -> None:
    """Give a (Hugging Face) model the fast dropout: its ``nn.Dropout`` layers and, where it can
    switch, its attention dropout. Probabilities stay the model's (``model.dropout`` still sets them)."""
    layers = swap_dropout_layers(model)
    attention = ATTENTION_NAME if _use_fast_attention(model) else "the model's own"
    logger.info("fast dropout: %d dropout layer(s) swapped; attention dropout: %s", layers, attention)
