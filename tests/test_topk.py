"""Block-max pruned top-k selects the same values as a full selection, partial blocks and ties included."""

from __future__ import annotations

import pytest
import torch

from text_retrieval.retrieval.topk import pruned_topk


@pytest.mark.parametrize("n, k", [(100_003, 10), (70_000, 1000), (5_000, 100), (64, 5)])
def test_pruned_topk_equals_a_full_selection(n, k):
    scores = torch.randn(7, n, generator=torch.Generator().manual_seed(n))
    values, indices = pruned_topk(scores, k)
    expected = torch.topk(scores, k, dim=1)
    assert torch.equal(values, expected.values)
    assert torch.equal(torch.gather(scores, 1, indices), values)  # the positions hold those values


def test_ties_at_the_kth_value_keep_the_exact_values():
    scores = torch.zeros(3, 50_000)
    scores[:, ::997] = 1.0  # 51 columns tied at the top, k = 60 reaches into the ties at 0
    values, indices = pruned_topk(scores, 60)
    assert torch.equal(values, torch.topk(scores, 60, dim=1).values)
    assert torch.equal(torch.gather(scores, 1, indices), values)
    assert all(len(set(row.tolist())) == 60 for row in indices)  # distinct columns
