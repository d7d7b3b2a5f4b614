"""An open_clip model with a similarity head: raw tower features, the head decides each side.

Stock open_clip L2-normalises both towers inside ``forward`` and so can only train cosine. Here the
towers are called with ``normalize=False`` and the raw features go to the loss (InfoNCE or SigLIP's
sigmoid loss, :mod:`clipmag.scoring.losses`) with the model's head, which decides how much of each
side's magnitude survives (docs/method.md section 1). Which tower is the *query* follows the
objective: the image for ``i2t``, the text for ``t2i``; ``sym`` trains both softmax axes and takes
the query side from the config.

Checkpoint compatibility. ``ClipMagModel.state_dict()`` uses open_clip's own key names (no wrapper
prefix), so a checkpoint's ``state_dict`` loads into the bare open_clip model. The learnable logit
scale *is* open_clip's ``logit_scale`` parameter (shared with the loss); a fixed scale is written
into it too, so open_clip consumers see the temperature the model was trained with. SigLIP's bias
is open_clip's ``logit_bias`` in the same way (added to an architecture that has none, and written
into the export's ``open_clip_config.json`` as ``init_logit_bias`` so open_clip builds it). Only a
learnable head adds keys (``clipmag_head.raw_q`` / ``raw_d``); ``export_open_clip`` leaves them out
and writes the head to ``clipmag_head.json`` beside the weights (safetensors: :mod:`image_text.weights`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

import open_clip
import torch
from torch import nn

from clipmag.scoring.diagnostics import magnitude_summary
from clipmag.scoring.head_record import HEAD_FILE, HeadRecord
from clipmag.scoring.heads import SimilarityHead, build_head
from clipmag.scoring.loss_config import SIGLIP_BIAS
from clipmag.scoring.losses import ContrastiveLoss, InfoNCE, SigLIP
from image_text.card import CARD_FILE, clip_model_card

from .architecture import build_open_clip, resolve_model_name
from .attention import text_tower, tower_attention, tower_lengths
from .model_config import ClipModelConfig
from .weights import (
    HEAD_PREFIX,
    WEIGHTS_FILE,
    export_weights_file,
    open_clip_state_dict,
    read_checkpoint,
    tested_model,
    write_weights,
)

OPEN_CLIP_CONFIG_FILE = "open_clip_config.json"
Side = Literal["image", "text"]


# (the loss's name, open_clip's name) of the values both hold: the scale, and SigLIP's bias
SHARED = (("log_scale", "logit_scale"), ("bias", "logit_bias"))


def _share(clip: nn.Module, loss: ContrastiveLoss, loss_name: str, clip_name: str) -> None:
    """Write the loss's value into open_clip's parameter; a learnable one becomes that one parameter
    (open_clip's name, open_clip's clamp), a fixed one leaves it frozen."""
    mine, theirs = getattr(loss, loss_name), getattr(clip, clip_name)
    with torch.no_grad():
        theirs.copy_(mine.detach().reshape(theirs.shape))
    if isinstance(mine, nn.Parameter):
        setattr(loss, loss_name, theirs)
    else:
        theirs.requires_grad_(False)


class ClipMagModel(nn.Module):
    """open_clip towers, their similarity head and the loss; ``model((images, texts))`` returns loss and
    stats. The model owns the head (exported with it, scoring with it) and hands it to the loss."""

    def __init__(
        self,
        clip: nn.Module,
        head: SimilarityHead,
        loss: ContrastiveLoss,
        query_side: Side,
        model_name: str,
        cpu_math_attention: bool = True,
    ) -> None:
        super().__init__()
        if query_side not in ("image", "text"):
            raise ValueError(f"query_side must be 'image' or 'text', got {query_side!r}")
        self.clip, self.head, self.loss = clip, head, loss
        self.query_side, self.model_name = query_side, model_name
        # the towers' sequence lengths for the attention kernel choice (train.cpu_math_attention)
        self.attention_lengths = tower_lengths(clip) if cpu_math_attention else {"image": None, "text": None}
        if isinstance(loss, SigLIP) and getattr(clip, "logit_bias", None) is None:
            clip.logit_bias = nn.Parameter(torch.zeros_like(clip.logit_scale))  # open_clip's SigLIP parameter
        for loss_name, clip_name in SHARED:
            if hasattr(loss, loss_name):
                _share(clip, loss, loss_name, clip_name)
        if not isinstance(loss, SigLIP) and getattr(clip, "logit_bias", None) is not None:
            clip.logit_bias.requires_grad_(False)  # a SigLIP bias has no role in InfoNCE

    def encode_image(self, images: torch.Tensor) -> torch.Tensor:
        with tower_attention(self.clip.visual, self.attention_lengths["image"]):
            return self.clip.encode_image(images, normalize=False)

    def encode_text(self, texts: torch.Tensor) -> torch.Tensor:
        with tower_attention(text_tower(self.clip), self.attention_lengths["text"]):
            return self.clip.encode_text(texts, normalize=False)

    def as_query_document(
        self, image_features: torch.Tensor, text_features: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return (image_features, text_features) if self.query_side == "image" else (text_features, image_features)

    def similarity(
        self, image_features: torch.Tensor, text_features: torch.Tensor, head: SimilarityHead | None = None
    ) -> torch.Tensor:
        """[N_images, N_texts] head scores with the trained query side (rows rank texts, columns images)."""
        head = head or self.head
        if self.query_side == "image":
            return head.score(image_features, text_features)
        return head.score(text_features, image_features).t()

    def forward(self, batch: tuple[torch.Tensor, ...]) -> dict[str, Any]:
        """``batch = (images, tokens, ...)`` on any device; images may be stored in half precision."""
        return self.loss_from(batch, tuple(self.embed_parts(batch)))

    # ---- the parts gradient caching calls (clipmag/train/grad_cache.py) ------------------------------
    def chunks(self, batch: tuple[torch.Tensor, ...], size: int) -> list[tuple[torch.Tensor, ...]]:
        return [tuple(t[start : start + size] for t in batch) for start in range(0, batch[0].shape[0], size)]

    def embed_parts(self, batch: tuple[torch.Tensor, ...]) -> Iterator[torch.Tensor]:
        """Raw image features of the batch's pairs, then their text features."""
        device = self.clip.logit_scale.device
        yield self.encode_image(batch[0].to(device, torch.float32, non_blocking=True))
        yield self.encode_text(batch[1].to(device, non_blocking=True))

    def loss_from(self, batch: tuple[torch.Tensor, ...], embeddings: tuple[torch.Tensor, ...]) -> dict[str, Any]:
        query, documents = self.as_query_document(*embeddings)
        out: dict[str, Any] = dict(self.loss(query, documents, self.head))
        stats = magnitude_summary(query.detach(), documents.detach(), self.head, float(out["scale"]))
        out.update(stats)
        out["image_norm_mean"] = stats["q_norm_mean"] if self.query_side == "image" else stats["d_norm_mean"]
        out["text_norm_mean"] = stats["d_norm_mean"] if self.query_side == "image" else stats["q_norm_mean"]
        return out

    # ---- open_clip-compatible state ----------------------------------------------------------
    def state_dict(self, *args: Any, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        if args or kwargs:  # nested use by a parent module: keep the real layout
            return super().state_dict(*args, **kwargs)
        out: dict[str, Any] = OrderedDict()
        for key, value in super().state_dict().items():
            if key.startswith("clip."):
                out[key[len("clip.") :]] = value
            elif key.startswith("head."):
                out[HEAD_PREFIX + key[len("head.") :]] = value
        return out

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False):  # type: ignore[override]
        mapped: dict[str, Any] = {}
        for key, value in state_dict.items():
            if key.startswith(("clip.", "head.", "loss.")):
                return super().load_state_dict(state_dict, strict=strict, assign=assign)
            mapped[("head." + key[len(HEAD_PREFIX) :]) if key.startswith(HEAD_PREFIX) else "clip." + key] = value
        for loss_name, clip_name in SHARED:
            if not hasattr(self.loss, loss_name):
                continue
            mine = getattr(self.loss, loss_name)
            if isinstance(mine, nn.Parameter):
                mapped[f"loss.{loss_name}"] = mapped.get(f"clip.{clip_name}", mine.detach())
            else:  # a fixed value is the loss's, whatever the file holds
                mapped[f"loss.{loss_name}"] = mine.detach().clone()
                mapped[f"clip.{clip_name}"] = mine.detach().clone().reshape(getattr(self.clip, clip_name).shape)
        return super().load_state_dict(mapped, strict=strict, assign=assign)

    def head_record(self) -> HeadRecord:
        """Everything a scorer needs besides the weights: head settings, query side, the loss (kind,
        direction, scale, SigLIP's bias)."""
        return HeadRecord(
            head=self.head.to_dict(),
            query_side=self.query_side,
            loss_kind=self.loss.kind,
            loss_direction=self.loss.direction,
            scale=float(self.loss.current_scale().detach()),
            bias=float(self.loss.bias.detach()) if isinstance(self.loss, SigLIP) else None,
            model_name=self.model_name,
        )


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
    cfg = {"model_cfg": model_cfg, "preprocess_cfg": preprocess}
    (directory / OPEN_CLIP_CONFIG_FILE).write_text(json.dumps(cfg, indent=2))
    model.head_record().write(directory)
    (directory / CARD_FILE).write_text(clip_model_card(model.head_record()), encoding="utf-8")
    return directory


def _model_from_record(clip: nn.Module, record: HeadRecord, name: str) -> ClipMagModel:
    scale = record.scale if record.scale is not None and math.isfinite(record.scale) and record.scale > 0 else 1.0
    loss: ContrastiveLoss
    if record.loss_kind == "siglip":
        loss = SigLIP(scale, SIGLIP_BIAS if record.bias is None else record.bias, learnable=False, gather=False)
    else:
        loss = InfoNCE(scale=scale, direction=record.loss_direction or "both", gather=False)
    return ClipMagModel(clip, build_head(record), loss, record.query_side or "image", name)


RANDOM_INIT_NOTICE = "No pretrained weights loaded"  # open_clip's warning for a model it built without weights


class _DropRandomInitNotice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(RANDOM_INIT_NOTICE)


@contextlib.contextmanager
def _weights_from_clipmag() -> Iterator[None]:
    """Around open_clip building a model whose every tensor clipmag loads next: its warning that the
    model was "initialized randomly" (logged on the root logger) would be false, so it is dropped."""
    notice = _DropRandomInitNotice()
    logging.getLogger().addFilter(notice)
    try:
        yield
    finally:
        logging.getLogger().removeFilter(notice)


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
        with _weights_from_clipmag():
            clip, _, preprocess = open_clip.create_model_and_transforms(
                f"local-dir:{path}",
                load_weights=False,
                pretrained_text=False,  # the weights are ours, read above
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
    with _weights_from_clipmag():
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
