"""The ``optim`` section of every trainer's config, plain data (no torch, so a command line can show
it before anything heavy loads); :mod:`clipmag.train.optimizer` builds the optimizer it describes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from clipmag.config.checks import NonNegativeFloat, NonNegativeInt, PositiveFloat, Range

# An Adam beta: the decay of a running average, which torch takes in [0, 1).
Beta = Annotated[float, Range(0, 1, open_high=True)]


@dataclass
class OptimConfig:
    """The ``optim`` section of every trainer's config: AdamW with the paper's betas; gammas and the
    logit scale get their own group."""

    lr: NonNegativeFloat = 5e-6
    betas: tuple[Beta, ...] = (0.9, 0.98)
    eps: PositiveFloat = 1e-8
    weight_decay: NonNegativeFloat = 0.01
    gamma_lr: NonNegativeFloat = 1e-2
    scale_lr: NonNegativeFloat | None = None
    schedule: Literal["cosine", "linear", "constant"] = "cosine"
    warmup_steps: NonNegativeInt = 0
    clip_grad_norm: NonNegativeFloat = 1.0

    def __post_init__(self) -> None:
        if len(self.betas) != 2:
            raise ValueError(f"optim.betas takes two values (the first and second moment's), got {list(self.betas)}")
