"""The model card of a CLIP export (its ``README.md``): the head, which tower is the query, the loss,
how open_clip loads the towers and how the head scores their features."""

from __future__ import annotations

from clipmag.scoring.head_record import CARD_FILE, HEAD_FILE, HeadRecord
from clipmag.scoring.heads import build_head

__all__ = ["clip_model_card", "CARD_FILE"]

_CLIP_CARD = """---
library_name: open_clip
tags:
- clipmag
- head-{head}
---

# clipmag CLIP model, `{head}` head

Trained with clipmag's similarity head s(q, d) = (q / |q|^gq) . (d / |d|^gd), **gq = {gq:.6g},
gd = {gd:.6g}**, where q is the **{query_side}** tower's (unnormalised) features and d the other
tower's. Loss: {loss}; architecture `{model_name}`.

```python
import json

import open_clip
import torch
from huggingface_hub import snapshot_download

path = snapshot_download("REPO_ID")
model, _, preprocess = open_clip.create_model_and_transforms(f"local-dir:{{path}}")
tokenizer = open_clip.get_tokenizer(f"local-dir:{{path}}")
head = json.load(open(f"{{path}}/{head_file}"))["head"]  # the exponents: {head_dict}
```

Score with the head: scale each side by its norm to the power -g (q by gq, d by gd), then take
the dot product; `image_text.model.loading.load_clipmag(path)` does this for you.
"""


def _loss_line(record: HeadRecord) -> str:
    """The loss the model was trained with, as the card says it."""
    if record.loss_kind == "siglip":
        return f"SigLIP's sigmoid loss (loss kind siglip), scale {record.scale}, bias {record.bias}"
    return f"InfoNCE, direction {record.loss_direction}, scale {record.scale}"


def clip_model_card(record: HeadRecord) -> str:
    """The model card of a CLIP export: the head, which tower is the query, the loss, how to load and score."""
    gq, gd = build_head(record).gammas()
    values = {**record.to_dict(), "head": record.head_name, "head_dict": record.head, "head_file": HEAD_FILE}
    return _CLIP_CARD.format(**values, gq=gq, gd=gd, loss=_loss_line(record))
