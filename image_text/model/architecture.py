"""The open_clip model the ``model`` section (:mod:`image_text.model.config`) names, built.

``build_open_clip`` makes the towers: the architecture (open_clip's, one of ours in
``configs/clip/models``, or a JSON file), the weights of ``model.init``, then one tower's
weights from another model (``model.image_init`` / ``model.text_init``) and the locks
(``model.lock_image`` / ``model.lock_text``) of :mod:`image_text.model.towers`. A Hugging Face text
tower is built from its packaged copy when there is one (:mod:`image_text.model.hf_text`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import open_clip
from torch import nn

from clipmag.errors import ConfigError
from clipmag.train.dropout import set_layer_dropout

from .config import MODEL_CONFIG_DIR, RANDOM_INIT, ClipModelConfig
from .hf_text import hf_text_override, hf_tokenizer
from .towers import init_tower, lock_towers
from .weights import WEIGHTS_FILE, export_weights_file, open_clip_state_dict

logger = logging.getLogger("clipmag")


def register_model_configs(directory: str | Path = MODEL_CONFIG_DIR) -> None:
    """Make our JSON architectures known to open_clip (idempotent)."""
    directory = Path(directory)
    if directory.is_dir() and directory not in open_clip.factory._MODEL_CONFIG_PATHS:
        open_clip.add_model_config(directory)


def resolve_model_name(name: str) -> str:
    """An open_clip architecture name for ``name`` (a JSON file path gets registered first)."""
    register_model_configs()
    path = Path(name)
    if name.endswith(".json"):
        if not path.is_file():
            raise ValueError(f"model.name: JSON model config not found: {name}")
        open_clip.add_model_config(path)
        return path.stem
    if name not in open_clip.list_models():
        ours = sorted(p.stem for p in MODEL_CONFIG_DIR.glob("*.json"))
        raise ValueError(
            f"model.name: unknown open_clip architecture {name!r}; ours: {', '.join(ours)}; "
            f"or any of open_clip.list_models(), or a path to a JSON model config"
        )
    return name


def build_open_clip(cfg: ClipModelConfig) -> tuple[nn.Module, Callable, Callable, Callable]:
    """(open_clip model, train transform, eval transform, tokenizer) for ``cfg``, its towers initialised
    and locked as it says; a local checkpoint is read as tensors and plain data only."""
    name = resolve_model_name(cfg.name)
    start = None if cfg.init == RANDOM_INIT else cfg.init
    local = start is not None and (Path(start).is_file() or Path(start).is_dir())
    tag = None if local else start
    text = hf_text_override(open_clip.get_model_config(name) or {}, pretrained=not local)
    try:
        model, preprocess_train, preprocess_val = open_clip.create_model_and_transforms(name, pretrained=tag, **text)
    except RuntimeError as err:
        raise ConfigError(f"model.init={tag!r} for {name}: {err} (no downloads: give a local checkpoint)") from None
    if local:
        path = Path(start)
        path = export_weights_file(path) if path.is_dir() else path
        if path is None:
            raise ConfigError(f"model.init: no {WEIGHTS_FILE} in the folder {start}")
        state = open_clip_state_dict(path)
        if getattr(model, "logit_bias", None) is None:
            state.pop("logit_bias", None)  # a SigLIP run's bias: the loss of this run decides its own
        model.load_state_dict(state, strict=True)
        logger.info("loaded tower weights from %s", start)
    for side, source in (("image", cfg.image_init), ("text", cfg.text_init)):
        if source:
            init_tower(model, side, source, name)
    set_layer_dropout(model, cfg.dropout, name)
    lock_towers(model, cfg)
    tokenizer = hf_tokenizer(text["text_cfg"]) if text else open_clip.get_tokenizer(name)
    return model, preprocess_train, preprocess_val, tokenizer
