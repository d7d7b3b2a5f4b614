"""The image-text trainer's model section: which open_clip architecture, from which weights, with
which query tower and dropout (built by ``clipmag.clip.model.build_open_clip``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from clipmag.config.checks import Fraction


@dataclass
class ClipModelConfig:
    """The open_clip architecture and where its weights come from.

    ``name``: an open_clip architecture (``ViT-B-32``), one of ours in ``configs/clip/models``
    (``clipmag-tiny``) or a path to an open_clip JSON model config. ``pretrained``: an open_clip
    tag (needs its weights in the local cache: nothing is downloaded) or a local checkpoint
    (ours or open_clip's); ``None`` is random init. ``query_side`` is the query tower of the
    ``sym`` objective (``auto``: image); ``i2t`` / ``t2i`` fix it.

    ``dropout``: the probability of every dropout layer of both towers (``clipmag.train.dropout``).
    open_clip builds its own towers with attention dropout (``nn.MultiheadAttention``) as their only
    dropout, at 0, so ``null`` (the default: the architecture's own) trains without dropout; a timm or
    Hugging Face tower brings its own. Patch dropout and stochastic depth stay the architecture
    JSON's (``patch_dropout``, ``timm_drop_path``). ``0`` turns dropout off, which makes a run the same
    on any number of ranks (docs/cluster.md).
    """

    name: str = "clipmag-tiny"
    pretrained: str | None = None
    query_side: Literal["auto", "image", "text"] = "auto"
    dropout: Fraction | None = None
