"""The ``ContrastiveModel`` (clipmag/train/contract.py): two towers, the head and the loss."""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import nn

from clipmag.scoring.head_record import HeadRecord
from clipmag.scoring.heads import SimilarityHead
from clipmag.scoring.losses import InfoNCE

from .config import BagModelConfig


class BagOfWords(nn.Module):
    """A batch is ``{"query": ids, "document": ids}``, word ids of shape [rows, max_words] (0 pads)."""

    def __init__(self, cfg: BagModelConfig, head: SimilarityHead, loss: InfoNCE) -> None:
        super().__init__()
        self.query_words = nn.EmbeddingBag(cfg.buckets, cfg.dim, mode="mean", padding_idx=0)
        self.document_words = nn.EmbeddingBag(cfg.buckets, cfg.dim, mode="mean", padding_idx=0)
        self.head, self.loss = head, loss  # the model owns its head and gives it to the loss

    def forward(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return self.loss_from(batch, tuple(self.embed_parts(batch)))

    def chunks(self, batch: dict[str, torch.Tensor], size: int) -> list[dict[str, torch.Tensor]]:
        rows = batch["query"].shape[0]
        return [{side: ids[start : start + size] for side, ids in batch.items()} for start in range(0, rows, size)]

    def embed_parts(self, batch: dict[str, torch.Tensor]) -> Iterator[torch.Tensor]:
        yield self.query_words(batch["query"])  # one part at a time: gradient caching asks for each in turn
        yield self.document_words(batch["document"])

    def loss_from(
        self, batch: dict[str, torch.Tensor], embeddings: tuple[torch.Tensor, ...]
    ) -> dict[str, torch.Tensor]:
        queries, documents = embeddings
        return self.loss(queries, documents, self.head)

    def head_record(self) -> HeadRecord:
        """No ``query_side``: the towers are named by role, so the query tower is always ``query_words``."""
        return HeadRecord(
            head=self.head.to_dict(),
            loss_kind=self.loss.kind,
            loss_direction=self.loss.direction,
            scale=float(self.loss.current_scale().detach()),
        )
