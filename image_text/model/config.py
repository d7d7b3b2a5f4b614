"""Which open_clip model a run trains and where its weights come from: the ``model`` section, plain
data (no torch, no open_clip), so a command line can show and check it before anything heavy loads.
:mod:`image_text.model.architecture` builds what it names.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from clipmag.config.checks import Fraction, NonNegativeInt
from clipmag.registry.config_packages import packaged_configs

MODEL_CONFIG_DIR = packaged_configs("image_text") / "clip" / "models"  # our open_clip architectures (clipmag-tiny, ...)
RANDOM_INIT = "random"  # ``model.init``: fresh weights, as in the text trainer


@dataclass
class ClipModelConfig:
    """The open_clip architecture and where its weights come from.

    ``name``: an open_clip architecture (``ViT-B-32``), one of ours in ``configs/clip/models``
    (``clipmag-tiny``) or a path to an open_clip JSON model config. ``init``: where the starting
    weights come from, as in the text trainer: ``random`` (the default: fresh weights), an open_clip
    tag (needs its weights in the local cache: nothing is downloaded) or a local checkpoint (ours or
    open_clip's); ``model.pretrained`` is its old name, and its ``null`` is ``random``.
    ``query_side`` is the query tower of the ``sym`` objective (``auto``: image); ``i2t`` / ``t2i``
    fix it.

    ``image_init`` / ``text_init``: take that tower's weights from a clipmag CLIP export, a run
    folder, a checkpoint or an open_clip tag of this architecture (after ``init``).
    ``lock_image`` / ``lock_text``: freeze that tower as open_clip's ``--lock-image`` /
    ``--lock-text`` do, with their options: the last ``lock_image_unlocked_groups`` groups or
    ``lock_text_unlocked_layers`` layers stay trainable, ``lock_image_freeze_bn_stats`` freezes
    batch-norm statistics, and ``lock_text_freeze_layer_norm=false`` keeps the text tower's
    LayerNorms trainable (open_clip only freezes them).

    ``dropout``: the probability of every dropout layer of both towers (``clipmag.train.dropout``).
    open_clip builds its own towers with attention dropout (``nn.MultiheadAttention``) as their only
    dropout, at 0, so ``null`` (the default: the architecture's own) trains without dropout; a timm or
    Hugging Face tower brings its own. Patch dropout and stochastic depth stay the architecture
    JSON's (``patch_dropout``, ``timm_drop_path``). ``0`` turns dropout off, which makes a run the same
    on any number of ranks (docs/cluster.md).
    """

    name: str = "clipmag-tiny"
    init: str = RANDOM_INIT
    query_side: Literal["auto", "image", "text"] = "auto"
    image_init: str | None = None
    text_init: str | None = None
    lock_image: bool = False
    lock_image_unlocked_groups: NonNegativeInt = 0
    lock_image_freeze_bn_stats: bool = False
    lock_text: bool = False
    lock_text_unlocked_layers: NonNegativeInt = 0
    lock_text_freeze_layer_norm: bool = True
    dropout: Fraction | None = None


def lock_problems(cfg: ClipModelConfig) -> list[str]:
    """Lock options given without their lock (they would do nothing)."""
    options = {
        "lock_image": ("lock_image_unlocked_groups", "lock_image_freeze_bn_stats"),
        "lock_text": ("lock_text_unlocked_layers",),
    }
    problems = [
        f"model.{option} is set but model.{lock} is not: set model.{lock}=true or drop it"
        for lock, names in options.items()
        for option in names
        if getattr(cfg, option) and not getattr(cfg, lock)
    ]
    if not cfg.lock_text_freeze_layer_norm and not cfg.lock_text:
        problems.append("model.lock_text_freeze_layer_norm=false is set but model.lock_text is not: drop it")
    return problems


def is_our_architecture(name: str) -> bool:
    """Whether ``model.name`` is one of ours or an existing JSON file: both are known without asking
    open_clip, which loads torch (a command line checks its defaults before anything heavy loads)."""
    path = Path(name) if name.endswith(".json") else MODEL_CONFIG_DIR / f"{name}.json"
    return path.is_file()
