"""Exact top-k kernels - a blocked matmul + top-k - and the choice between them per case.

torch (CPU or GPU) computes ``queries @ docs.T`` a block of queries at a time into a score buffer
allocated once (no page faults per block) and selects the top k with block-max pruning
(``pruned_topk``: a selection over the maxima of 16-column blocks, then over the candidates);
faiss's brute-force ``knn`` does the same with its own BLAS blocking and heap selection. Which is
faster swings with the machine and its load, so ``choose_backend("auto")`` times both on a slice of
the first case it meets (64 queries x 16,384 documents, best of two) and keeps the winner for every
case of the same size class in this process (device, dimension, corpus and k sizes rounded to powers
of two, thread count); on a GPU it is torch. The choice and its timings go into the results.
"""

from __future__ import annotations

import math
import time

import faiss
import torch
import torch.nn.functional as F

__all__ = ["KERNELS", "MIN_QUERY_BLOCK", "choose_backend", "pruned_topk"]

MIN_QUERY_BLOCK = 64  # queries per matmul at the least; more where the memory budget allows (faster GEMMs)
PRUNE_WIDTH = 16  # columns per block of the block-max pruning of the top-k selection
_CALIBRATION = (64, 16_384)  # queries x documents timed per backend when choosing
_CHOICES: dict[tuple, tuple[str, dict[str, float]]] = {}  # per process: case -> (backend, timings)


def pruned_topk(scores: torch.Tensor, k: int, width: int = PRUNE_WIDTH) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.topk(scores, k, dim=1)`` by block-max pruning: the k-th largest score is at least the
    k-th largest of the maxima of ``width``-column blocks, so only the k blocks of highest maximum
    can hold a top-k score. A top-k over the block maxima, then over those ``k * width`` candidates,
    reads the scores once instead of selecting over every column: the same values (scores tied
    with the k-th may come from another of the tied columns), at a fraction of the cost when
    ``k * width`` is small against the row."""
    rows, n = scores.shape
    if k * width * 4 > n:  # too few blocks to prune: plain selection
        return torch.topk(scores, k, dim=1)
    whole = n - n % width
    maxima = F.max_pool1d(scores.unsqueeze(1), width).squeeze(1)  # whole blocks only; 2-3x faster than amax
    blocks = torch.topk(maxima, k, dim=1, sorted=False).indices
    offsets = torch.arange(width, device=scores.device)
    columns = (blocks.unsqueeze(2) * width + offsets).reshape(rows, -1)
    if whole < n:  # the last, partial block is always a candidate
        tail = torch.arange(whole, n, device=scores.device).expand(rows, -1)
        columns = torch.cat([columns, tail], dim=1)
    values, picked = torch.topk(torch.gather(scores, 1, columns), k, dim=1)
    return values, torch.gather(columns, 1, picked)


def _torch_topk(queries: torch.Tensor, docs: torch.Tensor, k: int, block: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``queries @ docs.T`` + top-k, ``block`` queries at a time, into a score buffer allocated once."""
    n_q = queries.shape[0]
    scores = torch.empty(min(block, n_q), docs.shape[0], dtype=docs.dtype, device=docs.device)
    values = torch.empty(n_q, k, dtype=docs.dtype, device=docs.device)
    indices = torch.empty(n_q, k, dtype=torch.long, device=docs.device)
    for start in range(0, n_q, block):
        rows = slice(start, min(start + block, n_q))
        block_scores = scores[: rows.stop - rows.start]
        torch.mm(queries[rows], docs.T, out=block_scores)
        values[rows], indices[rows] = pruned_topk(block_scores, k)
    return values, indices


def _faiss_topk(queries: torch.Tensor, docs: torch.Tensor, k: int, block: int) -> tuple[torch.Tensor, torch.Tensor]:
    values, indices = faiss.knn(queries.numpy(), docs.numpy(), k, metric=faiss.METRIC_INNER_PRODUCT)
    return torch.from_numpy(values), torch.from_numpy(indices)


KERNELS = {"torch": _torch_topk, "faiss": _faiss_topk}


def choose_backend(queries: torch.Tensor, docs: torch.Tensor, k: int, backend: str) -> tuple[str, dict[str, float]]:
    """The backend for this case: forced, torch on GPU, else the faster of the two on a timed slice."""
    if docs.device.type != "cpu":  # faiss here is the CPU build
        return "torch", {}
    if backend != "auto":
        return backend, {}
    case = (queries.shape[1], int(math.log2(docs.shape[0] + 1)), int(math.log2(k + 1)), torch.get_num_threads())
    if case not in _CHOICES:
        q, d = queries[: _CALIBRATION[0]], docs[: _CALIBRATION[1]]
        timings = {}
        for name, kernel in KERNELS.items():
            runs = []
            for _ in range(2):
                start = time.perf_counter()
                kernel(q, d, min(k, d.shape[0]), MIN_QUERY_BLOCK)
                runs.append(time.perf_counter() - start)
            timings[f"{name}_s"] = min(runs)
        _CHOICES[case] = (min(KERNELS, key=lambda n: timings[f"{n}_s"]), timings)
    return _CHOICES[case]
