"""Exact large-batch contrastive steps with bounded memory: gradient caching.

InfoNCE couples every row of a batch through its negatives, so splitting a batch into
micro-batches (``grad_accum``) changes the loss. Gradient caching (GradCache; Gao et al. 2021, and
sentence-transformers' ``CachedMultipleNegativesRankingLoss``) keeps the loss of the whole batch
while holding the activations of one chunk at a time:

1. embed every chunk without a graph, remembering each chunk's RNG state;
2. compute the loss of the whole batch (all ranks: InfoNCE gathers with gradient) on those
   embeddings as leaf tensors and back-propagate into them (and into the head's gammas and the
   logit scale, which the loss uses directly);
3. re-embed each chunk with a graph, replaying its RNG state so dropout draws the same masks, and
   back-propagate the cached embedding gradients through it, one part at a time (the chunk's
   queries, then its documents): a part's graph is freed before the next part is embedded, so
   the peak holds the activations of one chunk of one side, as sentence-transformers' does.

The result equals one backward pass over the whole batch up to float rounding. A model supports it
by splitting its forward into ``embed_parts`` and ``loss_from`` and saying how to cut a batch into
rows (``chunks``): every front end's model does, as the contract asks
(:class:`clipmag.train.contract.ContrastiveModel`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch

from clipmag.train.contract import ContrastiveModel


@contextlib.contextmanager
def _replayed(state: tuple[torch.Tensor, torch.Tensor | None], device: torch.device) -> Iterator[None]:
    """Run with the RNG as it was in ``state``; the global RNG is left as it was before."""
    cpu, accelerator = state
    with torch.random.fork_rng(devices=[device] if accelerator is not None else []):
        torch.set_rng_state(cpu)
        if accelerator is not None:
            torch.cuda.set_rng_state(accelerator, device)
        yield


def _rng_state(device: torch.device) -> tuple[torch.Tensor, torch.Tensor | None]:
    return torch.get_rng_state(), torch.cuda.get_rng_state(device) if device.type == "cuda" else None


def cached_backward(
    model: ContrastiveModel,
    batch: Any,
    chunk_size: int,
    backward: Callable[[torch.Tensor], None],
    device: torch.device,
    autocast: Callable[[], contextlib.AbstractContextManager],
) -> dict[str, Any]:
    """Accumulate into ``.grad`` the gradients of the whole batch's loss; return the loss dict.

    ``backward(loss)`` back-propagates the loss as the caller wants it scaled (accumulation,
    loss scaling); the cached gradients carry that scaling into the encoder passes.
    """
    pieces = model.chunks(batch, chunk_size)
    states, parts = [], []
    with torch.no_grad():
        for piece in pieces:
            states.append(_rng_state(device))
            with autocast():
                parts.append(tuple(model.embed_parts(piece)))
    leaves = tuple(torch.cat([p[i] for p in parts]).detach().requires_grad_() for i in range(len(parts[0])))
    with autocast():
        out = model.loss_from(batch, leaves)
    backward(out["loss"])
    grads = [leaf.grad if leaf.grad is not None else torch.zeros_like(leaf) for leaf in leaves]
    start = 0
    for piece, part, state in zip(pieces, parts, states):
        rows = part[0].shape[0]
        with _replayed(state, device):
            replay = model.embed_parts(piece)
            for grad in grads:  # one part's graph at a time
                with autocast():
                    embedding = next(replay)
                if embedding.requires_grad:  # a locked tower's features have nothing to train
                    (embedding.float() * grad[start : start + rows].float()).sum().backward()
        start += rows
    return out
