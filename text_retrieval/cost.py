"""The text trainer's count for ``clipmag-sweep plan`` (:mod:`clipmag.experiments.plan`).

One optimizer step embeds, on every rank and micro-batch, ``data.batch_size`` queries and as many
positives with ``data.hard_negatives`` negatives each (``sts``: two texts per pair, both on the
query side), every text at its side's max length. The encoder is built from its config on the meta
device (its tokenizer is real: it decides the lengths), so only the config and tokenizer files of the
named model are read. The loss and the head add a batch x candidates product, negligible next to the
encoders, and are left out.
"""

from __future__ import annotations

import torch

from clipmag.train.cost import CellCost, count_step
from text_retrieval.config import TextConfig
from text_retrieval.model.encoder import TextEncoder

__all__ = ["text_cell_cost"]


def text_cell_cost(cfg: TextConfig, world_size: int) -> CellCost:
    m, d = cfg.model, cfg.data
    longest = " ".join(["retrieval"] * (max(m.query_max_length, m.document_max_length) + 8))
    sides = {"query": 2 * d.batch_size} if d.objective == "sts" else {"query": d.batch_size}
    if d.objective != "sts":
        sides["document"] = d.batch_size * (1 + d.hard_negatives)

    def build() -> TextEncoder:
        return TextEncoder.from_pretrained(
            m.name_or_path,
            pooling=m.pooling,
            random_init_seed=0,
            query_max_length=m.query_max_length,
            document_max_length=m.document_max_length,
            precision="fp32",
        )

    def step(encoder: torch.nn.Module) -> torch.Tensor:
        total = torch.zeros((), device="meta")
        for side, rows in sides.items():
            tokens = encoder.tokenize([longest] * rows, side)
            total = total + encoder.embed({k: v.to("meta") for k, v in tokens.items()}).float().sum()
        return total

    parameters, flops = count_step(build, step)
    micro_batches = world_size * cfg.train.grad_accum
    return CellCost(cfg.train.steps, d.batch_size * micro_batches, parameters, flops * micro_batches)
