"""A trained CLIP model written as open_clip loads it: weights and config, with the head record and
the model card beside them, so open_clip users get the towers and clipmag users the head too (and a
Hugging Face text tower's config and tokenizer, so the export loads offline)."""

from __future__ import annotations

import json
from pathlib import Path

import open_clip

from .card import CARD_FILE, clip_model_card
from .clip_model import ClipMagModel
from .hf_text import is_hf_text, save_hf_text_files
from .weights import HEAD_PREFIX, write_weights

OPEN_CLIP_CONFIG_FILE = "open_clip_config.json"


def export_open_clip(model: ClipMagModel, directory: str | Path) -> Path:
    """Write open_clip-loadable weights + config and the head record to ``directory``.

    ``open_clip.create_model_and_transforms("local-dir:<directory>")`` loads the towers;
    ``load_clipmag`` also restores the head. The model card (``README.md``) says both.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    write_weights({k: v for k, v in model.state_dict().items() if not k.startswith(HEAD_PREFIX)}, directory)
    name = model.model_name
    preprocess = dict(getattr(model.clip.visual, "preprocess_cfg", {}) or {})
    model_cfg = dict(open_clip.get_model_config(name))
    if getattr(model.clip, "logit_bias", None) is not None:  # so that open_clip builds the parameter
        model_cfg["init_logit_bias"] = float(model.clip.logit_bias.detach().reshape(()))
    if is_hf_text(model_cfg):
        save_hf_text_files(model.clip, model_cfg, directory)
    cfg = {"model_cfg": model_cfg, "preprocess_cfg": preprocess}
    (directory / OPEN_CLIP_CONFIG_FILE).write_text(json.dumps(cfg, indent=2))
    model.head_record().write(directory)
    (directory / CARD_FILE).write_text(clip_model_card(model.head_record()), encoding="utf-8")
    return directory
