"""The one sentence-transformers module clipmag provides: one side of the learnable head.

sentence-transformers' built-in modules express the fixed heads (no transform, or ``Normalize``),
but not ``x / |x|^g`` for a learned ``g`` strictly between 0 and 1. ``NormPower`` is that transform,
computed by the same function clipmag scores with (``clipmag.scoring.heads.scale_by_norm_power``), so an
exported learnable head gives clipmag's scores in sentence-transformers. A model that uses it
loads with clipmag installed and ``SentenceTransformer(path, trust_remote_code=True)``:
sentence-transformers >= 6 imports module classes outside its own package only when trusted.
Exports name it by this dotted package path, which sentence-transformers imports from the installed
package and never from a model folder (a one-dot ``name.Class`` would be read from ``name.py`` there).
"""

from __future__ import annotations

from typing import Any

import torch
from sentence_transformers.base.modules import Module

from clipmag.scoring.heads import scale_by_norm_power

__all__ = ["NormPower"]


class NormPower(Module):
    """``sentence_embedding <- x / |x|^gamma`` row-wise (gamma 1: unit norm; 0: unchanged)."""

    config_keys: list[str] = ["gamma"]

    def __init__(self, gamma: float) -> None:
        super().__init__()
        if not 0.0 <= float(gamma) <= 1.0:
            raise ValueError(f"NormPower: gamma must lie in [0, 1], got {gamma}")
        self.gamma = float(gamma)

    def forward(self, features: dict[str, torch.Tensor | Any], **kwargs: Any) -> dict[str, torch.Tensor | Any]:
        x = features["sentence_embedding"]
        features["sentence_embedding"] = scale_by_norm_power(x, self.gamma).to(x.dtype)
        return features

    def save(self, output_path: str, *args: Any, safe_serialization: bool = True, **kwargs: Any) -> None:
        self.save_config(output_path)
