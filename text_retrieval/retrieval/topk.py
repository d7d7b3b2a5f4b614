"""Exact top-k kernels - a blocked matmul + top-k - and the choice between them per case.

torch (CPU or GPU) computes ``queries @ docs.T`` a block of queries at a time into a score buffer
allocated once (no page faults per block) and takes ``torch.topk``; faiss's brute-force ``knn`` does
the same with its own BLAS blocking and heap selection. Which is faster swings with the machine and
its load, so ``choose_backend("auto")`` times both on a slice of the first case it meets (64 queries
x 16,384 documents, best of two) and keeps the winner for every case of the same size class in this
process (device, dimension, corpus and k sizes rounded to powers of two, thread count); on a GPU it
is torch. The choice and its timings go into the results.
"""

from __future__ import annotations

import math
import time

import faiss
import torch

__all__ = ["KERNELS", "MIN_QUERY_BLOCK", "choose_backend"]

MIN_QUERY_BLOCK = 64  # queries per matmul at the least; more where the memory budget allows (faster GEMMs)
_CALIBRATION = (64, 16_384)  # queries x documents timed per backend when choosing
_CHOICES: dict[tuple, tuple[str, dict[str, float]]] = {}  # per process: case -> (backend, timings)


def _torch_topk(queries: torch.Tensor, docs: torch.Tensor, k: int, block: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``queries @ docs.T`` + top-k, ``block`` queries at a time, into buffers allocated once."""
    n_q = queries.shape[0]
    scores = torch.empty(min(block, n_q), docs.shape[0], dtype=docs.dtype, device=docs.device)
    values = torch.empty(n_q, k, dtype=docs.dtype, device=docs.device)
    indices = torch.empty(n_q, k, dtype=torch.long, device=docs.device)
    for start in range(0, n_q, block):
        rows = slice(start, min(start + block, n_q))
        block_scores = scores[: rows.stop - rows.start]
        torch.mm(queries[rows], docs.T, out=block_scores)
        torch.topk(block_scores, k, dim=1, out=(values[rows], indices[rows]))
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
