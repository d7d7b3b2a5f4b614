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
and writes the head to ``clipmag_head.json`` beside the weights (safetensors: :mod:`image_text.model.weights`).
Exporting is :mod:`image_text.model.export`, loading an export or a checkpoint back
:mod:`image_text.model.loading`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import Any, Literal

import torch
from torch import nn

from clipmag.scoring.diagnostics import magnitude_summary
from clipmag.scoring.head_record import HeadRecord
from clipmag.scoring.heads import SimilarityHead
from clipmag.scoring.losses import ContrastiveLoss, SigLIP

from .attention import text_tower, tower_attention, tower_lengths
from .weights import HEAD_PREFIX

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
