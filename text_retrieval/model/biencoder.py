"""The model the text trainer optimises: one encoder for both sides, with the training objective.

``infonce``: (query, positive, hard negatives) embedded and scored by the head, InfoNCE in the
configured direction (paper default q2d, scale 20) with negatives gathered across ranks.
``sts``: (text_a, text_b, gold on [0, 1]) pairs and an MSE loss on ``sts_scale * head.paired(a, b)``
(docs/method.md section 4: scale 1 for scores normalised on both sides, 0.01 on unnormalised
ones), the symmetric-task experiment where asymmetric heads are expected to fail.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from clipmag.scoring.diagnostics import magnitude_summary
from clipmag.scoring.head_record import HeadRecord
from clipmag.scoring.heads import SimilarityHead
from clipmag.scoring.losses import ContrastiveLoss
from text_retrieval.model.encoder import TextEncoder

__all__ = ["BiEncoder", "default_sts_scale"]


class BiEncoder(nn.Module):
    """Encoder plus the loss; ``forward(batch)`` returns the loss and statistics.

    The encoder owns the head (it is exported and scores with it); the loss is given that head at
    every call, so training and every later use score with one object."""

    def __init__(
        self, encoder: TextEncoder, loss: ContrastiveLoss, objective: str, hard_negatives: int, sts_scale: float
    ) -> None:
        super().__init__()
        self.encoder, self.loss = encoder, loss
        self.objective, self.hard_negatives, self.sts_scale = objective, hard_negatives, sts_scale

    @property
    def head(self) -> SimilarityHead:
        return self.encoder.head

    def head_record(self) -> HeadRecord:
        """The encoder's record plus the loss it trains with and the max lengths it trains at."""
        scale = self.sts_scale if self.objective == "sts" else float(self.loss.current_scale().detach())
        contrastive = self.objective != "sts"
        return dataclasses.replace(
            self.encoder.head_record(),
            loss_kind=self.loss.kind if contrastive else "mse",
            loss_direction=self.loss.direction if contrastive else None,
            scale=scale,
            bias=float(self.loss.bias.detach()) if contrastive and self.loss.kind == "siglip" else None,
            training_query_max_length=self.encoder.query_max_length,
            training_document_max_length=self.encoder.document_max_length,
        )

    def _embed(self, texts: list[str], side: str) -> torch.Tensor:
        tokens = self.encoder.tokenize(texts, side)  # type: ignore[arg-type]
        return self.encoder.embed({k: v.to(self.encoder.device) for k, v in tokens.items()})

    def forward(self, batch: dict[str, Any]) -> dict[str, Any]:
        return self.loss_from(batch, tuple(self.embed_parts(batch)))

    # ---- the parts gradient caching calls (clipmag/train/grad_cache.py) ------------------------------
    def chunks(self, batch: dict[str, list], size: int) -> list[dict[str, list]]:
        """Consecutive row ranges; a row's hard negatives travel with it."""
        rows = len(next(iter(batch.values())))
        return [{k: v[start : start + size] for k, v in batch.items()} for start in range(0, rows, size)]

    def embed_parts(self, batch: dict[str, Any]) -> Iterator[torch.Tensor]:
        """STS: text_a, then text_b embeddings; InfoNCE: queries [n, D], then documents [n, 1 + k, D]."""
        if self.objective == "sts":
            yield self._embed(batch["text_a"], "query")
            yield self._embed(batch["text_b"], "query")
            return
        yield self._embed(batch["query"], "query")
        n, k = len(batch["query"]), self.hard_negatives
        documents = list(batch["positive"])
        if k:
            for i, negatives in enumerate(batch["negatives"]):
                documents.extend(_take_negatives(negatives, k, i))
        docs = self._embed(documents, "document")
        yield docs[:n].unsqueeze(1) if k == 0 else torch.cat([docs[:n].unsqueeze(1), docs[n:].view(n, k, -1)], dim=1)

    def loss_from(self, batch: dict[str, Any], embeddings: tuple[torch.Tensor, ...]) -> dict[str, Any]:
        if self.objective == "sts":
            return self._sts(batch, *embeddings)
        queries, grouped = embeddings
        out = self.loss(queries, grouped, self.head)
        out.update(magnitude_summary(queries, grouped[:, 0], self.head, float(out["scale"])))
        return out

    def _sts(self, batch: dict[str, Any], a: torch.Tensor, b: torch.Tensor) -> dict[str, Any]:
        predicted = self.sts_scale * self.head.paired(a, b)
        gold = torch.as_tensor(batch["score"], dtype=predicted.dtype, device=predicted.device)
        out: dict[str, Any] = {"loss": F.mse_loss(predicted, gold)}
        out.update(magnitude_summary(a, b, self.head, self.sts_scale))
        return out


def _take_negatives(negatives: list[str], k: int, row: int) -> list[str]:
    if not negatives:
        raise ValueError(f"data.hard_negatives={k} but training sample {row} of this batch has no negatives")
    return [negatives[j % len(negatives)] for j in range(k)]


def default_sts_scale(head: SimilarityHead) -> float:
    """Paper.md section 4: MSE on scores normalised on both sides (cosine) directly, on any score
    that keeps a norm scaled by 0.01. Read from the head's exponents, not its name."""
    return 1.0 if head.gammas() == (1.0, 1.0) else 0.01
