"""A tiny two-tower task on synthetic features, used to test the loop and the distributed loss.

Every micro-batch is generated from (seed, micro-batch index) for the *global* batch and then
sliced by rank, so N ranks with batch B see exactly what one process sees with batch N*B.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import torch
from torch import nn

from clipmag import distributed as dist_utils
from clipmag.diagnostics import magnitude_summary
from clipmag.head_record import HeadRecord
from clipmag.heads import SimilarityHead
from clipmag.losses import InfoNCE

IN_DIM, OUT_DIM = 12, 6


def global_batch(seed: int, index: int, size: int, negatives: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed * 100_003 + index)
    query = torch.randn(size, IN_DIM, generator=g)
    positive = query + 0.3 * torch.randn(size, IN_DIM, generator=g)
    docs = [positive.unsqueeze(1)]
    if negatives:
        docs.append(torch.randn(size, negatives, IN_DIM, generator=g))
    return {"query": query, "documents": torch.cat(docs, dim=1)}


class TwoTower(nn.Module):
    def __init__(self, head: SimilarityHead, loss: InfoNCE) -> None:
        super().__init__()
        self.query_encoder = nn.Sequential(nn.Linear(IN_DIM, 16), nn.Tanh(), nn.Linear(16, OUT_DIM))
        self.doc_encoder = nn.Sequential(nn.Linear(IN_DIM, 16), nn.Tanh(), nn.Linear(16, OUT_DIM))
        self.head, self.loss = head, loss

    def forward(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        q = self.query_encoder(batch["query"])
        d = self.doc_encoder(batch["documents"])
        out = self.loss(q, d)
        out.update(magnitude_summary(q, d[:, 0], self.head, float(out["scale"])))
        return out

    def head_record(self) -> HeadRecord:
        return HeadRecord(self.head.to_dict(), "query", self.loss.direction, float(self.loss.current_scale().detach()))


class ToyTask:
    primary_metric = "accuracy"

    def __init__(self, head: SimilarityHead, loss: InfoNCE, batch_size: int, seed: int = 0, negatives: int = 0, fail_at: int | None = None) -> None:
        self.head, self.loss, self.batch_size, self.seed = head, loss, batch_size, seed
        self.negatives, self.fail_at = negatives, fail_at

    def build_model(self) -> nn.Module:
        return TwoTower(self.head, self.loss)

    def local_batch_size(self) -> int:
        return self.batch_size

    def train_batches(self, start_step: int) -> Iterator[dict[str, torch.Tensor]]:
        rank, world = dist_utils.get_rank(), dist_utils.get_world_size()
        index = start_step
        while True:
            if self.fail_at is not None and index == self.fail_at:
                raise KeyboardInterrupt(f"simulated crash at micro-batch {index}")
            batch = global_batch(self.seed, index, self.batch_size * world, self.negatives)
            yield {k: v[rank * self.batch_size : (rank + 1) * self.batch_size] for k, v in batch.items()}
            index += 1

    def evaluate(self, model: nn.Module) -> dict[str, float]:
        batch = global_batch(self.seed + 1, 0, 64)
        return {"accuracy": float(model(batch)["accuracy"])}

    def export(self, model: nn.Module, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        torch.save({"state_dict": model.state_dict(), "head": self.head.to_dict()}, directory / "model.pt")
