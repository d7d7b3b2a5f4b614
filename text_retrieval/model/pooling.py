"""Poolings: how a transformer's outputs become one vector per text, and the model each one needs.

``mean``, ``cls`` and ``last`` pool the hidden states; ``splade`` pools the masked-language-model
logits into SPLADE's term weights (one per vocabulary entry), so it loads the model with its MLM head.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from transformers import AutoConfig, AutoModel, AutoModelForMaskedLM, PreTrainedModel

from clipmag.storage.safe_load import check_torch_weights_folder
from clipmag.storage.safetensors_files import check_safetensors_folder
from clipmag.train.dropout import dropout_overrides
from text_retrieval.config import POOLINGS

__all__ = ["POOLINGS", "VOCABULARY_POOLINGS", "VOCABULARY_LOGITS_BUDGET", "pool", "splade_pool", "load_model"]

# Poolings that read the masked-language-model logits (one value per vocabulary term), not the hidden states.
VOCABULARY_POOLINGS = frozenset({"splade"})
VOCABULARY_LOGITS_BUDGET = 1 << 26  # logits per encoding batch (256 MB in fp32) for those poolings


def pool(hidden: torch.Tensor, attention_mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """Pool token states [N, L, D] into [N, D]; padding never contributes.

    ``last`` takes the last position whose mask is 1, which is correct for right padding (index
    ``length - 1``) and left padding (the final position) alike.
    """
    if pooling == "mean":
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        summed = (hidden * mask).sum(dim=1, dtype=torch.float32)
        return summed / mask.sum(dim=1, dtype=torch.float32).clamp_min(1e-9)
    if pooling == "cls":
        return hidden[:, 0].float()
    if pooling == "last":
        positions = torch.arange(attention_mask.shape[1], device=attention_mask.device)
        last = (attention_mask.long() * (positions + 1)).argmax(dim=1)
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), last].float()
    raise ValueError(f"unknown pooling {pooling!r}; valid: {', '.join(POOLINGS)}")


class _TokenMax(torch.autograd.Function):
    """The maximum over tokens of logits [N, L, V] whose padding positions are -inf, filled in place.

    The logits are the vocabulary head's output and nothing else reads them, so the padding is filled
    into them, not into a copy (``masked_fill``); and the backward pass writes torch's ``amax``
    gradient (each maximum's share, split evenly between tied maxima) as the logits' gradient at
    once, where ``masked_fill``'s backward copies it again to zero the padding, on which no maximum
    lies. Two fewer [N, L, V] tensors a step - a SPLADE step's largest - for the same values: the
    shares are divided as torch divides them (tests/test_splade.py trains both to the same bits).
    """

    @staticmethod
    def forward(ctx: Any, logits: torch.Tensor, padding: torch.Tensor) -> torch.Tensor:
        # through a detached alias, which shares the version counter: had any other step saved the
        # logits for its backward pass, that pass would refuse the change instead of reading it
        logits.detach().masked_fill_(padding, float("-inf"))
        best = logits.amax(dim=1)
        ctx.save_for_backward(logits, best)
        return best

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        logits, best = ctx.saved_tensors
        at_max = logits == best.unsqueeze(1)
        share = grad.unsqueeze(1) / at_max.sum(dim=1, keepdim=True)
        return torch.where(at_max, share, 0), None


def splade_pool(logits: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """SPLADE's term weights [N, V] from MLM logits [N, L, V]: per term, the maximum over the text's
    tokens of log(1 + relu(logit)), in fp32. The logits are overwritten (padding set to -inf).

    log1p(relu(.)) is monotone, so the maximum is taken over the logits first and the activation
    applied once to [N, V]: the same vector and gradient (it reaches the arg-max token either way)
    without a second [N, L, V] tensor (:class:`_TokenMax`).
    """
    best = _TokenMax.apply(logits, ~attention_mask.bool().unsqueeze(-1))
    return torch.log1p(torch.relu(best.float()))


def load_model(
    source: str,
    pooling: str,
    random_init_seed: int | None,
    model_kwargs: Mapping[str, Any],
    dropout: float | None = None,
) -> PreTrainedModel:
    """The transformer, with its masked-language-model head when the pooling reads vocabulary logits.

    ``random_init_seed`` draws fresh weights in a forked RNG (the caller's random state is untouched).
    A folder's weights files are checked first: a truncated one is named (transformers would not).
    ``dropout`` replaces every dropout probability of the model's config (``model.dropout``)."""
    auto = AutoModelForMaskedLM if pooling in VOCABULARY_POOLINGS else AutoModel
    config = {} if dropout is None else dropout_overrides(AutoConfig.from_pretrained(source), dropout, source)
    if random_init_seed is None:
        check_safetensors_folder(source)
        check_torch_weights_folder(source)
        return auto.from_pretrained(source, **config, **model_kwargs)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(random_init_seed)
        return auto.from_config(AutoConfig.from_pretrained(source, **config), **model_kwargs)
