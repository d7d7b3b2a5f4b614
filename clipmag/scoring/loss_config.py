"""The ``loss`` section of a config, plain data, and what its kind decides of it; the losses themselves
are :mod:`clipmag.scoring.losses`. No torch here, so a command line resolves and shows the section
before anything heavy loads.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Annotated, Literal

from clipmag.config.checks import Fraction, Range
from clipmag.errors import ConfigError

Direction = Literal["q2d", "d2q", "both"]
DIRECTIONS: tuple[str, ...] = ("q2d", "d2q", "both")
LossKind = Literal["infonce", "siglip"]
SIGLIP_SCALE, SIGLIP_BIAS = 10.0, -10.0  # open_clip's SigLIP start: logit_scale log(10), logit_bias -10
# The largest scale (and SigLIP bias) a config takes. The loss keeps its scale as a float32 logarithm
# and multiplies similarities by it: a scale of 1e300 is inf there, and logits of 1e4 x a cosine
# still fit fp16 (65504). The paper's scales go up to 200.
MAX_LOGIT_SCALE = 1e4
LogitScale = Annotated[float, Range(0, MAX_LOGIT_SCALE, open_low=True)]
LogitBias = Annotated[float, Range(-MAX_LOGIT_SCALE, MAX_LOGIT_SCALE)]


@dataclass
class LossConfig:
    """The ``loss`` section of every trainer's config (paper defaults: InfoNCE, one direction, scale
    20 for every head).

    ``kind``: ``infonce`` or ``siglip``. ``direction=auto`` lets the front end derive InfoNCE's
    softmax axis from its objective (text: ``q2d``; CLIP: ``both`` for ``sym``, ``q2d`` for ``i2t`` /
    ``t2i``); SigLIP has none. ``scale``: the starting scale; unset, the kind's own (InfoNCE: the
    front end's, 20 for text and 1/0.07 for CLIP; SigLIP: 10). ``learnable_scale`` trains the scale
    and SigLIP's bias. ``bias``: SigLIP's starting logit bias (unset: -10, as open_clip).
    """

    direction: Literal["auto", "q2d", "d2q", "both"] = "auto"
    scale: LogitScale | None = None
    learnable_scale: bool = False
    max_scale: LogitScale = 100.0
    label_smoothing: Fraction = 0.0
    kind: LossKind = "infonce"
    bias: LogitBias | None = None


def resolve_loss(cfg: LossConfig, infonce_scale: float) -> LossConfig:
    """Fill what the kind decides - the starting scale (``infonce_scale`` for InfoNCE, 10 for SigLIP)
    and SigLIP's starting bias (-10) - and refuse a setting the kind has no use for."""
    if cfg.kind == "infonce":
        if cfg.bias is not None:
            raise ConfigError(
                "loss.bias is SigLIP's starting logit bias and InfoNCE has none: drop it or set loss.kind=siglip"
            )
        return dataclasses.replace(cfg, scale=infonce_scale if cfg.scale is None else cfg.scale)
    if cfg.label_smoothing:
        raise ConfigError("loss.label_smoothing smooths InfoNCE's softmax targets and SigLIP has none: drop it")
    return dataclasses.replace(
        cfg,
        scale=SIGLIP_SCALE if cfg.scale is None else cfg.scale,
        bias=SIGLIP_BIAS if cfg.bias is None else cfg.bias,
    )
