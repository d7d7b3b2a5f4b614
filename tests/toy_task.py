"""A tiny two-tower task on synthetic features, used to test the loop and the distributed loss.

Every micro-batch is generated from (seed, micro-batch index) for the *global* batch and then
sliced by rank, so N ranks with batch B see exactly what one process sees with batch N*B.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn

from clipmag.runtime import distributed as dist_utils
from clipmag.scoring.diagnostics import magnitude_summary
from clipmag.scoring.head_record import HeadRecord
from clipmag.scoring.heads import SimilarityHead
from clipmag.scoring.losses import InfoNCE

IN_DIM, OUT_DIM = 12, 6


def global_batch(seed: int, index: int, size: int, negatives: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed * 100_003 + index)
    query = torch.randn(size, IN_DIM, generator=g)
    positive = query + 0.3 * torch.randn(size, IN_DIM, generator=g)
    docs = [positive.unsqueeze(1)]
    if negatives:
        docs.append(torch.randn(size, negatives, IN_DIM, generator=g))
    return {"query": query, "documents": torch.cat(docs, dim=1)}


class _NanGradient(torch.autograd.Function):
    """Identity forward, NaN backward: a finite loss whose gradient is not."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return x.clone()

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return grad * float("nan")


class TwoTower(nn.Module):
    """A ``ContrastiveModel`` (clipmag/train/contract.py): two small encoders, the head and the loss."""

    def __init__(self, head: SimilarityHead, loss: InfoNCE, dropout: float = 0.0) -> None:
        super().__init__()
        self.query_encoder = nn.Sequential(
            nn.Linear(IN_DIM, 16), nn.Tanh(), nn.Dropout(dropout), nn.Linear(16, OUT_DIM)
        )
        self.doc_encoder = nn.Sequential(nn.Linear(IN_DIM, 16), nn.Tanh(), nn.Linear(16, OUT_DIM))
        self.head, self.loss = head, loss

    def forward(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return self.loss_from(batch, tuple(self.embed_parts(batch)))

    def chunks(self, batch: dict[str, torch.Tensor], size: int) -> list[dict[str, torch.Tensor]]:
        rows = batch["query"].shape[0]
        return [{k: v[start : start + size] for k, v in batch.items()} for start in range(0, rows, size)]

    def embed_parts(self, batch: dict[str, torch.Tensor]) -> Iterator[torch.Tensor]:
        q = self.query_encoder(batch["query"])
        if "nan_gradient" in batch and bool(batch["nan_gradient"].any()):
            q = _NanGradient.apply(q)
        yield q
        yield self.doc_encoder(batch["documents"])

    def loss_from(
        self, batch: dict[str, torch.Tensor], embeddings: tuple[torch.Tensor, ...]
    ) -> dict[str, torch.Tensor]:
        q, d = embeddings
        out = self.loss(q, d, self.head)
        out.update(magnitude_summary(q, d[:, 0], self.head, float(out["scale"])))
        return out

    def head_record(self) -> HeadRecord:
        return HeadRecord(self.head.to_dict(), "query", self.loss.direction, float(self.loss.current_scale().detach()))


class ToyTask:
    """The worked example of a front end's task (docs/architecture.md): every member of the
    contract's ``Task`` (clipmag/train/contract.py), on the ``TwoTower`` model."""

    front_end = "toy"
    primary_metric = "accuracy"

    def __init__(
        self,
        head: SimilarityHead,
        loss: InfoNCE,
        batch_size: int,
        seed: int = 0,
        negatives: int = 0,
        fail_at: int | None = None,
        nan_gradient_at: int | None = None,
        peak_eval: int | None = None,
        dropout: float = 0.0,
        signal_at: int | None = None,
        step_delay_s: float = 0.0,
    ) -> None:
        self.head, self.loss, self.batch_size, self.seed = head, loss, batch_size, seed
        self.negatives, self.fail_at, self.nan_gradient_at = negatives, fail_at, nan_gradient_at
        self.peak_eval, self.evaluations, self.dropout = peak_eval, 0, dropout
        self.signal_at = signal_at  # rank 0 sends itself SIGTERM there, as a scheduler would
        self.step_delay_s = step_delay_s  # a slower step, for a test to act while a job runs

    def build_model(self) -> TwoTower:
        return TwoTower(self.head, self.loss, self.dropout)

    def run_identity(self) -> dict[str, Any]:
        return {"model": "two-tower"}

    def local_batch_size(self) -> int:
        return self.batch_size

    def train_batches(self, start_step: int) -> Iterator[dict[str, torch.Tensor]]:
        rank, world = dist_utils.get_rank(), dist_utils.get_world_size()
        index = start_step
        while True:
            if self.fail_at is not None and index == self.fail_at:
                raise KeyboardInterrupt(f"simulated crash at micro-batch {index}")
            if self.signal_at is not None and index == self.signal_at and rank == 0:
                os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(self.step_delay_s)
            batch = global_batch(self.seed, index, self.batch_size * world, self.negatives)
            batch["nan_gradient"] = torch.full((self.batch_size * world,), index == self.nan_gradient_at)
            yield {k: v[rank * self.batch_size : (rank + 1) * self.batch_size] for k, v in batch.items()}
            index += 1

    def evaluate(self, model: nn.Module) -> dict[str, float]:
        """Accuracy on a fixed batch; with ``peak_eval`` a metric that peaks at that evaluation."""
        self.evaluations += 1
        if self.peak_eval is not None:
            return {"accuracy": -abs(self.evaluations - self.peak_eval)}
        batch = global_batch(self.seed + 1, 0, 64)
        return {"accuracy": float(model(batch)["accuracy"])}

    def export(self, model: nn.Module, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        torch.save({"state_dict": model.state_dict(), "head": self.head.to_dict()}, directory / "model.pt")
