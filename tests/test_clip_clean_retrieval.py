"""Retrieval that no tie order decides: a tie between a match and a non-match counts against the
query whatever order the candidates are stored in, and the queries a tie decided are counted; the
held-out cleaning drops repeated images and captions several images share, and keeps the rest."""

from __future__ import annotations

import numpy as np
import torch
from PIL import Image

from image_text.data.near_duplicates import near_duplicate_rows, without_shared_captions
from image_text.data.shards import Sample
from image_text.evaluation.retrieval import image_text_recall, recall_hits, tied_queries


def test_a_tie_with_a_non_match_is_a_miss_in_any_order():
    # image 0 scores its caption 0 and image 1's caption 2 alike; image 1's captions win clearly
    scores = torch.tensor([[0.5, 0.1, 0.5], [0.0, 0.9, 0.8]])
    owner = torch.tensor([0, 1, 1])
    swapped = [2, 1, 0]
    for order in ([0, 1, 2], swapped):
        r = image_text_recall(scores[:, order], owner[order], ks=(1, 2))
        assert r["I->T R@1"] == 0.5 and r["I->T R@2"] == 1.0
    assert tied_queries(scores, owner, 1) == {"I->T": 1, "T->I": 0}
    assert tied_queries(scores, owner, 2) == {"I->T": 0, "T->I": 0}
    # two identical images: every caption of either ties between them, so T->I R@1 misses all
    same = torch.tensor([[0.7, 0.2], [0.7, 0.2]])
    hits = recall_hits(same, torch.tensor([0, 1]), ks=(1,))
    assert not hits["T->I R@1"].any() and tied_queries(same, torch.tensor([0, 1]), 1)["T->I"] == 2


def _image(colour: tuple[int, int, int], dot: tuple[int, int, int] | None = None) -> Image.Image:
    pixels = np.full((32, 32, 3), colour, dtype=np.uint8)
    if dot is not None:
        pixels[8:24, 8:24] = dot
    return Image.fromarray(pixels)


def test_held_out_cleaning_drops_repeats_and_shared_captions_only():
    train = [_image((255, 0, 0)), _image((0, 0, 255), (255, 255, 255))]
    held = [
        _image((255, 0, 0)),  # the first training image again
        _image((0, 0, 255), (255, 255, 0)),  # the second's colours, another centre: its own emoji
        _image((0, 255, 0)),
        _image((0, 255, 0)),  # a repeat within the split: the first of the two stays
    ]
    assert near_duplicate_rows(held, train) == [0, 3]
    samples = [
        Sample("a", held[1], ["crayon", "blue square"]),
        Sample("b", held[2], ["Crayon ", "green square"]),
        Sample("c", held[2], ["crayon"]),
    ]
    kept, shared = without_shared_captions(samples)
    assert shared == ["crayon"]
    assert [(s.key, list(s.captions)) for s in kept] == [("a", ["blue square"]), ("b", ["green square"])]
