"""The text trainer's count for ``clipmag-sweep plan`` (:mod:`clipmag_experiments.sweep.plan`).

One optimizer step embeds, on every rank and micro-batch, ``data.batch_size`` queries and as many
positives with ``data.hard_negatives`` negatives each (``sts``: two texts per pair, both on the
query side), every text at its side's max length. The encoder is built from its config on the meta
device (its tokenizer is real: it decides the lengths), so only the config and tokenizer files of the
named model are read. On the meta device attention runs as matmuls and is counted (a CPU's fused
attention kernel is not, which is why a count there comes out lower). The loss and the head add a
batch x candidates product, negligible next to the encoders, and are left out. Gradient caching
(``train.chunk_size``) and activation checkpointing each add one more forward pass.

A count takes a second or two (the FLOP counter dispatches every op of a forward and backward in
Python), and a sweep's plan asks for one per configuration, of which a learning-rate grid has many
of one shape; so a step's count is kept for the process, keyed by what decides it (the model, its
pooling and lengths, the texts per side, the head's name, since a learnable head adds parameters,
and the repeated forwards), and every rate, seed and step count of that shape reads it.
"""

from __future__ import annotations

import torch

from clipmag.scoring.heads import build_head
from clipmag.train.cost import CellCost, count_step, extra_forwards
from text_retrieval.config import TextConfig
from text_retrieval.model.encoder import TextEncoder
from text_retrieval.model.pooling import VOCABULARY_POOLINGS, pool, splade_pool

__all__ = ["text_cell_cost"]

# (parameters, FLOPs) of one micro-batch step, by its shape (the module docstring says why)
_STEP_COUNTS: dict[tuple, tuple[int, float]] = {}


def text_cell_cost(cfg: TextConfig, world_size: int) -> CellCost:
    m, d = cfg.model, cfg.data
    longest = " ".join(["retrieval"] * (max(m.query_max_length, m.document_max_length) + 8))
    sides = {"query": 2 * d.batch_size} if cfg.objective == "sts" else {"query": d.batch_size}
    if cfg.objective != "sts":
        sides["document"] = d.batch_size * (1 + d.hard_negatives)

    def build() -> TextEncoder:
        return TextEncoder.from_pretrained(
            m.name,
            head=build_head(cfg.head),  # the run's own head, as the trainer builds it
            pooling=m.pooling,
            random_init_seed=0,
            query_max_length=m.query_max_length,
            document_max_length=m.document_max_length,
            precision="fp32",
        )

    def step(encoder: torch.nn.Module) -> torch.Tensor:
        # Every text fills its side's max length, so no position is padded: the model runs without an
        # attention mask (transformers inspects a given mask's values, which meta tensors do not have).
        total = torch.zeros((), device="meta")
        for side, rows in sides.items():
            ids = encoder.tokenize([longest] * rows, side)["input_ids"].to("meta")
            output = encoder.model(input_ids=ids)
            mask = torch.ones(ids.shape, dtype=torch.long, device="meta")
            if encoder.pooling in VOCABULARY_POOLINGS:
                pooled = splade_pool(output.logits, mask)
            else:
                pooled = pool(output.last_hidden_state, mask, encoder.pooling)
            total = total + pooled.float().sum()
        return total

    extra = extra_forwards(cfg.train)
    shape = (m.name, m.pooling, m.query_max_length, m.document_max_length, tuple(sides.items()), cfg.head.name, extra)
    if shape not in _STEP_COUNTS:
        _STEP_COUNTS[shape] = count_step(build, step, extra)
    parameters, flops = _STEP_COUNTS[shape]
    micro_batches = world_size * cfg.train.grad_accum
    return CellCost(cfg.train.steps, d.batch_size * micro_batches, parameters, flops * micro_batches)
