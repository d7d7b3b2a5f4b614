"""A clipmag CLIP model read back with its head: from an export folder, a training checkpoint or a run
folder, as tensors and plain data only (a file that needs pickle is refused)."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from pathlib import Path

import open_clip
import torch
from torch import nn

from clipmag.scoring.head_record import HEAD_FILE, HeadRecord
from clipmag.scoring.heads import build_head
from clipmag.scoring.loss_config import SIGLIP_BIAS
from clipmag.scoring.losses import ContrastiveLoss, InfoNCE, SigLIP

from .architecture import build_open_clip, resolve_model_name
from .clip_model import ClipMagModel
from .config import ClipModelConfig
from .export import OPEN_CLIP_CONFIG_FILE
from .hf_text import hf_text_override
from .random_init_notice import weights_from_clipmag
from .weights import WEIGHTS_FILE, export_weights_file, open_clip_state_dict, read_checkpoint, tested_model


def _model_from_record(clip: nn.Module, record: HeadRecord, name: str) -> ClipMagModel:
    """The model a head record describes around loaded towers: its head, its query side, and its loss
    with the recorded scale (and SigLIP's bias), so the loaded model scores as the trained one did."""
    scale = record.scale if record.scale is not None and math.isfinite(record.scale) and record.scale > 0 else 1.0
    loss: ContrastiveLoss
    if record.loss_kind == "siglip":
        loss = SigLIP(scale, SIGLIP_BIAS if record.bias is None else record.bias, learnable=False, gather=False)
    else:
        loss = InfoNCE(scale=scale, direction=record.loss_direction or "both", gather=False)
    return ClipMagModel(clip, build_head(record), loss, record.query_side or "image", name)


def load_clipmag(path: str | Path, device: str | torch.device = "cpu") -> tuple[ClipMagModel, Callable, Callable]:
    """(model with its head, eval transform, tokenizer) from an export folder, a training checkpoint
    or a run folder.

    An export folder holds ``open_clip_config.json``, the weights and ``clipmag_head.json``; a
    checkpoint (``checkpoints/latest.pt`` or ``best.pt``) holds the resolved config and the head
    record. A finished run folder gives the model its ``results.json`` tested (so an evaluation of
    the run scores the model its results describe); an unfinished one its latest checkpoint.
    Either way the head the model was trained with comes back. Files are read as tensors and plain
    data: one that needs pickle is refused.
    """
    path = tested_model(Path(path))
    if path.is_dir() and HeadRecord.exists(path):
        record = HeadRecord.read(path)
        weights = export_weights_file(path)
        if weights is None:
            raise FileNotFoundError(f"{path}: no {WEIGHTS_FILE} beside its {HEAD_FILE}: not a complete CLIP export")
        state = open_clip_state_dict(weights)
        model_cfg = json.loads((path / OPEN_CLIP_CONFIG_FILE).read_text())["model_cfg"]
        text = hf_text_override(model_cfg, pretrained=False, source=path)
        with weights_from_clipmag():
            clip, _, preprocess = open_clip.create_model_and_transforms(
                f"local-dir:{path}",
                load_weights=False,
                pretrained_text=False,  # the weights are ours, read above
                **text,  # a Hugging Face text tower: its shapes from the export's own config
            )
        clip.load_state_dict(state)
        tokenizer = open_clip.get_tokenizer(f"local-dir:{path}")
        model = _model_from_record(clip, record, record.model_name or "local")
        return model.to(device).eval(), preprocess, tokenizer
    if path.is_dir():
        path = path / "checkpoints" / "latest.pt"
    if not path.is_file():
        raise FileNotFoundError(f"no clipmag model at {path}: expected an export folder or a checkpoint file")
    ckpt = read_checkpoint(path)
    model_cfg = ckpt["config"]["model"]
    with weights_from_clipmag():
        clip, _, preprocess, tokenizer = build_open_clip(ClipModelConfig(name=model_cfg["name"]))
    record = HeadRecord.from_dict(ckpt["head"], source=f"{path}: 'head'")
    if record.query_side is None:  # a format-1 checkpoint kept only the head: the rest is in its config
        objective = ckpt["config"].get("objective", "sym")
        record = dataclasses.replace(
            record,
            query_side={"i2t": "image", "t2i": "text"}.get(objective, model_cfg.get("query_side", "image")),
            loss_kind="infonce",
            loss_direction=ckpt["config"].get("loss", {}).get("direction", "both"),
            scale=math.exp(float(ckpt["state_dict"]["logit_scale"])),
        )
    model = _model_from_record(clip, record, resolve_model_name(model_cfg["name"]))
    model.load_state_dict(ckpt["state_dict"])
    return model.to(device).eval(), preprocess, tokenizer
