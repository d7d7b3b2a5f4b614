"""Run under torchrun: InfoNCE and SigLIP on each rank's slice vs one process on the whole batch.

Writes, from rank 0, the largest absolute difference of the loss and of every gradient for each
(loss, head, direction, hard negatives) case to the JSON path given as the first argument.
"""

from __future__ import annotations

import json
import sys

import torch
from torch import nn

from clipmag.runtime import distributed as dist_utils
from clipmag.scoring.heads import build_head
from clipmag.scoring.losses import InfoNCE, SigLIP

BATCH, DIM = 4, 5


def run_case(head_name: str, direction: str | None, negatives: int, rank: int, world: int) -> dict[str, float]:
    """``direction`` None: SigLIP (no direction); else InfoNCE in that direction."""
    g = torch.Generator().manual_seed(7)
    q_all = torch.randn(BATCH * world, DIM, generator=g, dtype=torch.float64) * torch.rand(
        BATCH * world, 1, generator=g, dtype=torch.float64
    ).add(0.5)
    d_all = torch.randn(BATCH * world, 1 + negatives, DIM, generator=g, dtype=torch.float64)

    def make_loss(gather: bool) -> nn.ModuleDict:
        head = build_head(head_name, gq=0.3, gd=0.7) if head_name == "learnable" else build_head(head_name)
        if direction is None:
            loss = SigLIP(scale=10.0, bias=-3.0, learnable=True, gather=gather)
        else:
            loss = InfoNCE(scale=10.0, direction=direction, learnable_scale=True, gather=gather)
        return nn.ModuleDict({"head": head, "loss": loss}).double()

    ref_loss_fn = make_loss(gather=False)
    q_ref, d_ref = q_all.clone().requires_grad_(), d_all.clone().requires_grad_()
    ref = ref_loss_fn["loss"](q_ref, d_ref, ref_loss_fn["head"])["loss"]
    ref.backward()

    loss_fn = make_loss(gather=True)
    rows = slice(rank * BATCH, (rank + 1) * BATCH)
    q, d = q_all[rows].clone().requires_grad_(), d_all[rows].clone().requires_grad_()
    local = loss_fn["loss"](q, d, loss_fn["head"])["loss"]
    local.backward()
    # DDP averages gradients over ranks; do the same by hand here.
    loss = dist_utils.all_reduce_mean(local)
    q_grad = dist_utils.all_gather_no_grad(q.grad) / world
    d_grad = dist_utils.all_gather_no_grad(d.grad) / world
    diffs = {
        "loss": float((loss - ref.detach()).abs()),
        "query_grad": float((q_grad - q_ref.grad).abs().max()),
        "document_grad": float((d_grad - d_ref.grad).abs().max()),
    }
    for (name, p), (_, p_ref) in zip(loss_fn.named_parameters(), ref_loss_fn.named_parameters()):
        grad = dist_utils.all_reduce_sum(p.grad) / world
        diffs[f"{name}_grad"] = float((grad - p_ref.grad).abs().max())
    return diffs


def main() -> None:
    ctx = dist_utils.init_distributed("cpu")
    results = {}
    for head in ("learnable", "qnorm"):
        for direction in ("q2d", "d2q", "both", None):
            for negatives in (0, 2):
                results[f"{head}-{direction or 'siglip'}-neg{negatives}"] = run_case(
                    head, direction, negatives, ctx.rank, ctx.world_size
                )
    if ctx.is_main:
        with open(sys.argv[1], "w") as f:
            json.dump(results, f, indent=1)
    dist_utils.cleanup()


if __name__ == "__main__":
    main()
