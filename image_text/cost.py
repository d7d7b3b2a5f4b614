"""The image-text trainer's count for ``clipmag-sweep plan`` (:mod:`clipmag_experiments.sweep.plan`).

One optimizer step encodes, on every rank and micro-batch, ``data.batch_size`` images at the
tower's input size and as many captions at its context length; gradient caching
(``train.chunk_size``) and activation checkpointing each add one more forward pass. The open_clip
model is built on the meta device (nothing is read; a Hugging Face text tower from its config
alone). The loss and the head add a batch x batch product, left out.
"""

from __future__ import annotations

import open_clip
import torch

from clipmag.train.cost import CellCost, count_step, extra_forwards

from .config import ClipConfig
from .model.architecture import resolve_model_name
from .model.hf_text import hf_text_override, text_context_length

__all__ = ["clip_cell_cost"]


def clip_cell_cost(cfg: ClipConfig, world_size: int) -> CellCost:
    name = resolve_model_name(cfg.model.name)
    rows = cfg.data.batch_size
    model_cfg = open_clip.get_model_config(name) or {}
    # the tokenizer's padded length (a Hugging Face tower's own limit is longer), shapes only
    context = text_context_length(model_cfg)
    text = hf_text_override(model_cfg, pretrained=False)

    def step(model: torch.nn.Module) -> torch.Tensor:
        size = model.visual.image_size
        height, width = (size, size) if isinstance(size, int) else size
        images = torch.zeros(rows, 3, height, width, device="meta")
        tokens = torch.zeros(rows, context, dtype=torch.long, device="meta")
        return model.encode_image(images).float().sum() + encode_text(model, tokens).float().sum()

    def encode_text(model: torch.nn.Module, tokens: torch.Tensor) -> torch.Tensor:
        if text:  # a Hugging Face tower asks its padding mask for a value a meta tensor has not: the same
            # products without the mask (mean pooling, then the projection)
            return model.text.proj(model.text.transformer(input_ids=tokens).last_hidden_state.mean(1))
        return model.encode_text(tokens)

    def build() -> torch.nn.Module:  # open_clip moves the model to its device argument (CPU by default)
        return open_clip.create_model(name, device="meta", **text)

    parameters, flops = count_step(build, step, extra_forwards(cfg.train))
    micro_batches = world_size * cfg.train.grad_accum
    return CellCost(cfg.train.steps, rows * micro_batches, parameters, flops * micro_batches)
