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
# head record names (``--norm model``, ``--head model``, ``retrieval.norms=[model]``); ``null`` was
# its old spelling in some (OWN_HEAD_RENAME, a RENAMED_VALUES entry of their config classes).
OWN_HEAD = "model"
OWN_HEAD_RENAME: dict[str | None, str] = {None: OWN_HEAD, "null": OWN_HEAD}


@dataclass
class HeadConfig:
    """The ``head`` section of every trainer's config; ``gq``/``gd`` are the learnable head's starting
    exponents."""

    name: HeadName = "cosine"
    gq: float = 0.5
    gd: float = 0.5


@dataclass
class HeadChoice:
    """The ``head`` section of a tool that scores with a trained model (evaluation, mining, serving):
    ``name`` is the head to score with, ``model`` (the default) the model's own (its head record)."""

    name: Literal[(*HEAD_NAMES, OWN_HEAD)] = OWN_HEAD  # type: ignore[valid-type]

    @property
    def instead(self) -> str | None:
        """The head named to score with instead of the model's own; None for the model's own."""
        return None if self.name == OWN_HEAD else self.name
