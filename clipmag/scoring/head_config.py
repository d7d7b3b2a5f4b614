"""The ``head`` section of a config, plain data: which similarity head a run trains or a tool scores
with. The heads themselves (torch modules) are :mod:`clipmag.scoring.heads`; this module imports no
torch, so a command line can parse and show its settings before anything heavy loads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# The heads of clipmag.scoring.heads.HEADS, in its order; written out here so that a config or a
# command line can check a name without importing torch (a test keeps the two the same).
HEAD_NAMES: tuple[str, ...] = ("cosine", "dot", "qnorm", "dnorm", "learnable")
HeadName = Literal[HEAD_NAMES]  # type: ignore[valid-type]
# The word every tool that scores with a trained model takes for the model's own head, the one its
# head record names (``--norm model``, ``--head model``, ``retrieval.norms=[model]``).
OWN_HEAD = "model"


@dataclass
class HeadConfig:
    """The ``head`` section of every trainer's config; ``gq``/``gd`` are the learnable head's starting
    exponents."""

    name: HeadName = "cosine"
    gq: float = 0.5
    gd: float = 0.5


@dataclass
class HeadChoice:
    """The ``head`` section of a tool that scores with a trained model (evaluation, mining): ``name``
    is the head to score with instead of the model's own; unset, the model's own (its head record)."""

    name: HeadName | None = None
