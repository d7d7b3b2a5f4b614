"""Towers taken from another model and locked towers: LiT-style tuning (Zhai et al. 2022) on open_clip.

``model.image_init`` / ``model.text_init`` copy one tower's weights from another model, leaving the
other tower as it was: a clipmag CLIP export, a run folder (the model its ``results.json`` tested,
or its latest checkpoint), a checkpoint file (clipmag's or open_clip's, read as tensors only), or an
open_clip pretrained tag of the run's architecture (from the local cache: nothing is downloaded).
The source must hold the same tower, every weight in the same shape; else one line names the first
that differs. The image tower is every ``visual.*`` weight; the text tower every other weight but
the logit scale and bias.

``model.lock_image`` / ``model.lock_text`` freeze a tower with open_clip's own ``lock_image_tower``
/ ``lock_text_tower`` (and their options). A frozen weight gets no gradient, so the optimizer,
which takes trainable parameters only (:mod:`clipmag.train.optimizer`), keeps no group and no
state for it and never decays it; it is saved in every checkpoint and export like any other, and a
resumed run locks it again from its config, so it leaves training bit for bit as it came in.
"""

from __future__ import annotations

import logging
from pathlib import Path

import open_clip
import torch
from torch import nn

from clipmag.errors import ConfigError
from clipmag.train.checkpoint import CHECKPOINT_DIR, LATEST

from .config import ClipModelConfig
from .weights import export_weights_file, open_clip_state_dict, tested_model

logger = logging.getLogger("clipmag")

IMAGE_PREFIX = "visual."
NOT_A_TOWER = ("logit_scale", "logit_bias")


def tower_keys(state: dict[str, torch.Tensor], side: str) -> list[str]:
    """The keys of ``state`` that belong to the ``image`` or ``text`` tower."""
    if side == "image":
        return [k for k in state if k.startswith(IMAGE_PREFIX)]
    return [k for k in state if not k.startswith(IMAGE_PREFIX) and k not in NOT_A_TOWER]


def _weights_file(path: Path, key: str) -> Path:
    """The weights file a path names: itself, an export's weights, or a run's tested model."""
    path = tested_model(path)
    if path.is_file():
        return path
    found = export_weights_file(path)
    if found is None and (path / CHECKPOINT_DIR / LATEST).is_file():
        found = path / CHECKPOINT_DIR / LATEST
    if found is None:
        raise ConfigError(f"{key}={path}: no weights there (a CLIP export, a run folder or a checkpoint file)")
    return found


def source_state(source: str, model_name: str, key: str) -> dict[str, torch.Tensor]:
    """The open_clip weights ``source`` names: a path (see the module), else an open_clip tag."""
    if Path(source).exists():
        return open_clip_state_dict(_weights_file(Path(source), key))
    try:
        return open_clip.create_model(model_name, pretrained=source).state_dict()
    except RuntimeError as err:
        raise ConfigError(
            f"{key}={source}: not a file or folder, and not an open_clip tag of {model_name} with weights in "
            f"the local cache ({err}); nothing is downloaded"
        ) from None


def init_tower(model: nn.Module, side: str, source: str, model_name: str) -> None:
    """Copy the ``side`` tower of ``source`` into ``model`` (open_clip), checking every key and shape."""
    key = f"model.{side}_init"
    state = source_state(source, model_name, key)
    target = model.state_dict()
    wanted = tower_keys(target, side)
    missing = [k for k in wanted if k not in state]
    if missing:
        raise ConfigError(
            f"{key}={source}: no {side} tower of {model_name} there (it lacks {missing[0]} and "
            f"{len(missing) - 1} more weights); give a model of the same architecture"
        )
    for k in wanted:
        if state[k].shape != target[k].shape:
            raise ConfigError(
                f"{key}={source}: its {side} tower does not fit {model_name}: {k} has shape "
                f"{list(state[k].shape)} there and {list(target[k].shape)} here"
            )
    model.load_state_dict({k: state[k] for k in wanted}, strict=False)
    logger.info("%s tower: %d weights from %s", side, len(wanted), source)


def lock_towers(model: nn.Module, cfg: ClipModelConfig) -> None:
    """Freeze the towers ``cfg`` locks, as open_clip does (its unlocked groups / layers and norm options)."""
    if cfg.lock_image:
        model.lock_image_tower(
            unlocked_groups=cfg.lock_image_unlocked_groups, freeze_bn_stats=cfg.lock_image_freeze_bn_stats
        )
    if cfg.lock_text:
        model.lock_text_tower(unlocked_layers=cfg.lock_text_unlocked_layers)  # LayerNorms freeze with the rest
        if not cfg.lock_text_freeze_layer_norm:
            for name, module in model.named_modules():
                if isinstance(module, nn.LayerNorm) and not name.startswith(IMAGE_PREFIX):
                    module.requires_grad_(True)
    named = dict(model.named_parameters())
    for side, locked in (("image", cfg.lock_image), ("text", cfg.lock_text)):
        if locked:
            params = [named[k] for k in tower_keys(named, side)]
            frozen = sum(p.numel() for p in params if not p.requires_grad)
            logger.info("%s tower locked: %d of %d weights frozen", side, frozen, sum(p.numel() for p in params))
