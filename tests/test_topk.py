"""The running top-k selects the same values as one full selection over everything it was fed."""

from __future__ import annotations

import pytest
import torch

from text_retrieval.retrieval.topk import PRUNE_WIDTH, RunningTopK, torch_topk


def _fed(scores: torch.Tensor, k: int, widths: list[int], query_blocks: int = 1) -> RunningTopK:
    """A RunningTopK fed ``scores`` in column chunks of ``widths`` and, within each, in row blocks."""
    found = RunningTopK(scores.shape[0], k)
    edges = torch.tensor([0, *widths]).cumsum(0).tolist()
    step = -(-scores.shape[0] // query_blocks)
    for start, stop in zip(edges, edges[1:]):
        for first in range(0, scores.shape[0], step):
            rows = slice(first, min(first + step, scores.shape[0]))
            found.add_scores(scores[rows, start:stop], start, rows)
    return found


@pytest.mark.parametrize(
    "widths, k, query_blocks",
    [
        ([100_003], 10, 1),  # one pruned block with a partial tail
        ([70_000, 30_001, 5], 1000, 1),  # pruned, then too few groups to prune, then a sliver
        ([40_000] * 5, 100, 3),  # several query blocks
        ([64], 5, 1),
        ([3, 2], 8, 1),  # fewer documents than k: the rest stays empty
    ],
)
def test_the_running_selection_equals_a_full_selection(widths, k, query_blocks):
    scores = torch.randn(7, sum(widths), generator=torch.Generator().manual_seed(sum(widths)))
    values, positions = _fed(scores, k, widths, query_blocks).result()
    kept = min(k, scores.shape[1])
    expected = torch.topk(scores, kept, dim=1)
    assert torch.equal(values[:, :kept], expected.values)
    assert torch.equal(torch.gather(scores, 1, positions[:, :kept]), values[:, :kept])  # positions hold them
    assert (positions[:, kept:] == -1).all() and torch.isinf(values[:, kept:]).all()


def test_a_later_better_chunk_raises_the_floor_and_wins():
    """The first chunk's k-th best is a floor for the next; a chunk of higher scores must replace it."""
    generator = torch.Generator().manual_seed(1)
    low, high = torch.randn(4, 50_000, generator=generator), torch.randn(4, 50_000, generator=generator) + 3
    values, positions = _fed(torch.cat([low, high], dim=1), 500, [50_000, 50_000]).result()
    assert torch.equal(values, torch.topk(high, 500, dim=1).values)
    assert (positions >= 50_000).all()


def test_columns_past_the_last_whole_group_are_candidates_too():
    scores = torch.randn(6, 100_003, generator=torch.Generator().manual_seed(4))
    scores[::2, -2:] += 10  # the best scores of every other row lie in the 3 columns no group holds
    found = RunningTopK(6, 10)
    found.add_scores(scores[:, :50_000], 0)  # a finite floor first
    found.add_scores(scores[:, 50_000:], 50_000)
    values, positions = found.result()
    assert torch.equal(values, torch.topk(scores, 10, dim=1).values)
    assert (positions[::2, :2] >= 100_001).all()


def test_ties_at_the_kth_value_keep_the_exact_values():
    scores = torch.zeros(3, 50_000)
    scores[:, ::997] = 1.0  # 51 columns tied at the top, k = 60 reaches into the ties at 0
    values, positions = _fed(scores, 60, [20_000, 30_000]).result()
    assert torch.equal(values, torch.topk(scores, 60, dim=1).values)
    assert torch.equal(torch.gather(scores, 1, positions), values)
    assert all(len(set(row.tolist())) == 60 for row in positions)  # distinct columns


@pytest.mark.parametrize("n, k", [(40 * PRUNE_WIDTH * 4 + 3, 5), (300, 50)])  # pruned; too few groups
def test_nan_scores_are_refused_naming_the_document(n, k):
    """A NaN score (an embedding that is not finite) would make the ranking arbitrary: refused."""
    scores = torch.randn(2, n)
    scores[1, 7] = float("nan")
    with pytest.raises(ValueError, match=r"NaN at document positions \[1007\]"):
        RunningTopK(2, k).add_scores(scores, 1000)
    with pytest.raises(ValueError, match=r"NaN at document positions \[1007\]"):
        RunningTopK(2, k).add_found(scores, torch.arange(n).expand(2, -1) + 1000)


def test_found_hits_merge_like_scores():
    """Per-chunk hits selected elsewhere (faiss) merge into the same top k as their scores would."""
    scores = torch.randn(5, 30_000, generator=torch.Generator().manual_seed(2))
    found = RunningTopK(5, 50)
    for start in range(0, 30_000, 10_000):
        chunk = torch.topk(scores[:, start : start + 10_000], 50, dim=1)
        found.add_found(chunk.values, chunk.indices + start)
    values, positions = found.result()
    assert torch.equal(values, torch.topk(scores, 50, dim=1).values)
    assert torch.equal(torch.gather(scores, 1, positions), values)


def test_torch_topk_scores_queries_against_documents():
    generator = torch.Generator().manual_seed(3)
    queries, docs = torch.randn(9, 16, generator=generator), torch.randn(2_000, 16, generator=generator)
    values, positions = torch_topk(queries, docs, 20)
    expected = torch.topk(queries @ docs.T, 20, dim=1)
    torch.testing.assert_close(values, expected.values)
    assert torch.equal(positions, expected.indices)
