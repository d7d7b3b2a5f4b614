"""The text trainer's count for ``clipmag-sweep plan`` (:mod:`clipmag_experiments.sweep.plan`).

One optimizer step embeds, on every rank and micro-batch, ``data.batch_size`` queries and as many
positives with ``data.hard_negatives`` negatives each (``sts``: two texts per pair, both on the
query side), every text at its side's max length. The encoder is built from its config on the meta
device (its tokenizer is real: it decides the lengths), so only the config and tokenizer files of the
named model are read. On the meta device attention runs as matmuls and is counted (a CPU's fused
attention kernel is not, which is why a count there comes out lower). The loss and the head add a
batch x candidates product, negligible next to the encoders, and are left out; a learnable head's
two gammas are added to the parameters. Gradient caching (``train.chunk_size``) and activation
checkpointing each add one more forward pass.

A count takes a second or two (the FLOP counter dispatches every op of a forward and backward in
Python, whatever the tensors' sizes), and a sweep's plan asks for one per configuration. Every op of
the encoder and its pooling acts on each text alone, so a step's FLOPs are the sum over its texts of
one text's forward and backward at its side's length: one text per side is counted, kept for the
process keyed by what decides it (the model, its pooling, the side and its length, the repeated
forwards), and every batch size, head, rate, seed and step count reads it.
"""

from __future__ import annotations

import torch

from clipmag.scoring.heads import build_head
from clipmag.train.cost import CellCost, count_step, extra_forwards
from text_retrieval.config import TextConfig, TextModelConfig
from text_retrieval.model.encoder import Side, TextEncoder
from text_retrieval.model.pooling import VOCABULARY_POOLINGS, pool, splade_pool

__all__ = ["text_cell_cost"]

# (the encoder's parameters, the FLOPs of one text's forward and backward), by what decides them
_TEXT_COUNTS: dict[tuple, tuple[int, float]] = {}


def _one_text(m: TextModelConfig, side: Side, extra: int) -> tuple[int, float]:
    """The encoder's parameters (no head) and the FLOPs of one ``side`` text at that side's max length."""
    length = m.query_max_length if side == "query" else m.document_max_length
    key = (m.name, m.pooling, side, length, extra)
    if key in _TEXT_COUNTS:
        return _TEXT_COUNTS[key]
    longest = " ".join(["retrieval"] * (length + 8))

    def build() -> TextEncoder:
        return TextEncoder.from_pretrained(
            m.name,
            head=build_head("cosine"),  # no parameters (an export's own head is not read): the run's is added
            pooling=m.pooling,
            random_init_seed=0,
            query_max_length=m.query_max_length,
            document_max_length=m.document_max_length,
            precision="fp32",
        )

    def step(encoder: torch.nn.Module) -> torch.Tensor:
        # The text fills its side's max length, so no position is padded: the model runs without an
        # attention mask (transformers inspects a given mask's values, which meta tensors do not have).
        ids = encoder.tokenize([longest], side)["input_ids"].to("meta")
        output = encoder.model(input_ids=ids)
        mask = torch.ones(ids.shape, dtype=torch.long, device="meta")
        if encoder.pooling in VOCABULARY_POOLINGS:
            pooled = splade_pool(output.logits, mask)
        else:
            pooled = pool(output.last_hidden_state, mask, encoder.pooling)
        return pooled.float().sum()

    _TEXT_COUNTS[key] = count_step(build, step, extra)
    return _TEXT_COUNTS[key]


def text_cell_cost(cfg: TextConfig, world_size: int) -> CellCost:
    m, d = cfg.model, cfg.data
    texts: dict[Side, int] = {"query": 2 * d.batch_size} if cfg.objective == "sts" else {"query": d.batch_size}
    if cfg.objective != "sts":
        texts["document"] = d.batch_size * (1 + d.hard_negatives)
    extra = extra_forwards(cfg.train)
    counts = {side: _one_text(m, side, extra) for side in texts}
    encoder_parameters = counts["query"][0]  # every side's count builds the same encoder
    head_parameters = sum(p.numel() for p in build_head(cfg.head).parameters())  # the run's own head
    flops = sum(rows * counts[side][1] for side, rows in texts.items())
    micro_batches = world_size * cfg.train.grad_accum
    return CellCost(
        cfg.train.steps, d.batch_size * micro_batches, encoder_parameters + head_parameters, flops * micro_batches
    )
