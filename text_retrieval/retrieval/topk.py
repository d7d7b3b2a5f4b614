"""Exact top-k: a running selection pruned by a score floor, two kernels, and the choice between them.

``RunningTopK`` keeps each query's k best (score, document) pairs over score blocks fed in any
order. The k-th best score so far is a floor that a new score must reach; where k scores are not
known yet, the k-th largest maximum of ``PRUNE_WIDTH``-column groups of the block is one (k
groups each hold a score at least that high). Only groups whose maximum reaches the floor are
read again, and only their scores that reach it are merged: after the first block of a stream few
do, so a pass over a million documents in chunks selects little more than the k it returns,
where a full ``torch.topk`` per chunk would select k of every chunk's columns. A group is every
``n/PRUNE_WIDTH``-th column (a strided slab, not 16 neighbours): the maxima are then an element-wise
maximum over 16 contiguous slabs, vectorised, 3x faster than pooling neighbouring columns.

torch computes the scores (``queries @ docs.T`` into a buffer its caller allocates once) and feeds
them to a ``RunningTopK``; faiss's brute-force ``knn`` does its own BLAS blocking and heap
selection, and its per-chunk results are merged the same way. Which is faster swings with the
machine and its load, so ``choose_backend("auto")`` times both on a slice of the first case it
meets (64 queries x 16,384 documents, best of two) and keeps the winner for every case of the same
size class in this process (device, dimension, corpus and k sizes rounded to powers of two, thread
count); on a GPU it is torch. The choice and its timings go into the results.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import faiss
import torch

__all__ = ["BACKEND_KERNELS", "PRUNE_WIDTH", "RunningTopK", "choose_backend", "faiss_topk", "torch_topk"]

PRUNE_WIDTH = 16  # columns per group of the floor pruning
_CALIBRATION = (64, 16_384)  # queries x documents timed per backend when choosing
_CHOICES: dict[tuple, tuple[str, dict[str, float]]] = {}  # per process: case -> (backend, timings)


class RunningTopK:
    """The ``k`` best (score, document position) pairs of each of ``n_queries`` queries so far.

    Positions not filled yet hold score -inf and position -1; a NaN score is refused (it names the
    document). Scores tied with the k-th may come from any of the tied documents."""

    def __init__(self, n_queries: int, k: int, device: torch.device | str = "cpu") -> None:
        self.k = k
        self.values = torch.full((n_queries, k), -math.inf, device=device)
        self.positions = torch.full((n_queries, k), -1, dtype=torch.long, device=device)

    def add_scores(self, scores: torch.Tensor, offset: int, rows: slice = slice(None)) -> None:
        """Merge ``scores`` [queries ``rows``, documents ``offset ...``]: column j is document ``offset + j``."""
        n_rows, n = scores.shape
        groups = n // PRUNE_WIDTH
        if groups < 4 * self.k:  # too few groups to prune by: the block's own top k
            best = torch.topk(scores, min(self.k, n), dim=1, sorted=False)  # a NaN would rank first
            if bool(torch.isnan(best.values).any()):
                raise _nan_error(torch.isnan(scores).any(dim=0).nonzero() + offset)
            self.add_found(best.values, best.indices + offset, rows)
            return
        floor = self.values[rows].amin(dim=1)  # the k-th best so far
        whole = groups * PRUNE_WIDTH
        maxima = scores[:, :whole].view(n_rows, PRUNE_WIDTH, groups).amax(dim=1)  # NaN where a group has one
        if bool(torch.isnan(maxima).any() or torch.isnan(scores[:, whole:]).any()):
            raise _nan_error(torch.isnan(scores).any(dim=0).nonzero() + offset)
        if bool(torch.isinf(floor).any()):  # fewer than k known: this block's own floor
            floor = torch.maximum(floor, torch.topk(maxima, self.k, dim=1, sorted=False).values.amin(dim=1))
        passing = maxima >= floor[:, None]
        counts = passing.sum(dim=1)
        row, group = passing.nonzero(as_tuple=True)
        width = int(counts.max())
        picked = torch.zeros(n_rows, width, dtype=torch.long, device=scores.device)  # each row's passing groups
        picked[row, _slots(row, counts)] = group
        members = torch.arange(PRUNE_WIDTH, device=scores.device) * groups
        columns = torch.empty(n_rows, width * PRUNE_WIDTH + n - whole, dtype=torch.long, device=scores.device)
        torch.add(picked[:, :, None], members, out=columns[:, : width * PRUNE_WIDTH].view(n_rows, width, PRUNE_WIDTH))
        columns[:, width * PRUNE_WIDTH :] = torch.arange(whole, n, device=scores.device)  # in no group: candidates
        candidates = torch.gather(scores, 1, columns)  # one dense gather, not ragged indexing: 3x faster
        padding = torch.arange(width, device=scores.device) >= counts[:, None]  # slots past a row's groups
        candidates[:, : width * PRUNE_WIDTH].view(n_rows, width, PRUNE_WIDTH).masked_fill_(
            padding[:, :, None], -math.inf
        )
        reached = (candidates >= floor[:, None]).view(-1).nonzero().squeeze(1)  # row-major: rows ascending
        self._merge(rows, reached // columns.shape[1], columns.view(-1)[reached] + offset, candidates.view(-1)[reached])

    def add_found(self, values: torch.Tensor, positions: torch.Tensor, rows: slice = slice(None)) -> None:
        """Merge hits already selected elsewhere (faiss's per-chunk top k): scores and document positions."""
        if bool(torch.isnan(values).any()):
            raise _nan_error(positions[torch.isnan(values)])
        floor = self.values[rows].amin(dim=1)
        row, column = (values >= floor[:, None]).nonzero(as_tuple=True)
        self._merge(rows, row, positions[row, column], values[row, column])

    def _merge(self, rows: slice, row: torch.Tensor, position: torch.Tensor, value: torch.Tensor) -> None:
        """Merge ragged candidates (``row`` ascending, as ``nonzero`` gives them) into ``rows``' top k."""
        values, positions = self.values[rows], self.positions[rows]
        n_rows, k = values.shape
        counts = torch.bincount(row, minlength=n_rows)
        width = int(counts.max()) if len(row) else 0
        if width == 0:
            return
        slot = k + _slots(row, counts)
        merged_values = torch.full((n_rows, k + width), -math.inf, device=values.device)
        merged_positions = torch.full((n_rows, k + width), -1, dtype=torch.long, device=values.device)
        merged_values[:, :k], merged_positions[:, :k] = values, positions
        merged_values[row, slot], merged_positions[row, slot] = value.to(values.dtype), position
        best, picked = torch.topk(merged_values, k, dim=1, sorted=False)
        self.values[rows], self.positions[rows] = best, torch.gather(merged_positions, 1, picked)

    def result(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(scores, positions), each query's best first."""
        values, order = torch.sort(self.values, dim=1, descending=True)
        return values, torch.gather(self.positions, 1, order)


def _nan_error(positions: torch.Tensor) -> ValueError:
    """A NaN score comes from an embedding that is not finite and would leave the ranking arbitrary."""
    return ValueError(
        f"scores hold NaN at document positions {sorted(set(positions.flatten().tolist()))[:5]}: a query or document "
        "embedding is not finite, and the ranking would be arbitrary"
    )


def _slots(row: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """Each entry's place among its row's entries (``row`` ascending; ``counts`` entries per row)."""
    return torch.arange(len(row), device=row.device) - (torch.cumsum(counts, 0) - counts)[row]


def torch_topk(queries: torch.Tensor, docs: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-``k`` of ``queries @ docs.T`` in one matmul and one running selection."""
    found = RunningTopK(queries.shape[0], k, docs.device)
    found.add_scores(queries @ docs.T, 0)
    return found.result()


def faiss_topk(queries: torch.Tensor, docs: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """faiss's brute-force inner-product top-``k`` (CPU tensors)."""
    values, positions = faiss.knn(queries.numpy(), docs.numpy(), k, metric=faiss.METRIC_INNER_PRODUCT)
    return torch.from_numpy(values), torch.from_numpy(positions)


BACKEND_KERNELS = {"torch": torch_topk, "faiss": faiss_topk}


def choose_backend(
    queries: torch.Tensor, first_documents: Callable[[int], torch.Tensor], rows: int, k: int, backend: str
) -> tuple[str, dict[str, float]]:
    """The backend for this case: forced, torch on GPU, else the faster of the two on a timed slice.

    ``rows`` is how many documents one search step scores; ``first_documents(n)`` gives the first
    ``n`` (transformed) and is called only when this case's size class has not been timed yet."""
    if queries.device.type != "cpu":  # faiss here is the CPU build
        return "torch", {}
    if backend != "auto":
        return backend, {}
    case = (queries.shape[1], int(math.log2(rows + 1)), int(math.log2(k + 1)), torch.get_num_threads())
    if case not in _CHOICES:
        q, d = queries[: _CALIBRATION[0]], first_documents(min(_CALIBRATION[1], rows))
        timings = {}
        for name, kernel in BACKEND_KERNELS.items():
            runs = []
            for _ in range(2):
                start = time.perf_counter()
                kernel(q, d, min(k, d.shape[0]))
                runs.append(time.perf_counter() - start)
            timings[f"{name}_s"] = min(runs)
        _CHOICES[case] = (min(BACKEND_KERNELS, key=lambda n: timings[f"{n}_s"]), timings)
    return _CHOICES[case]
