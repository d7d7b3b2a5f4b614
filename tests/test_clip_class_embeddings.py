"""Zero-shot class embeddings under every head (docs/clip.md, "A class embedding"): the wrapper's
classifier of ``clipmag-eval-clip-benchmark`` is each class's prompts' mean direction times their
mean norm, written out here from the raw prompt features; its direction is CLIP-benchmark's own
classifier, and each head scores it as the table of docs/clip.md says."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from clip_benchmark.metrics.zeroshot_classification import zero_shot_classifier

from clipmag.scoring.heads import build_head
from clipmag.scoring.losses import InfoNCE
from image_text.data import emoji
from image_text.evaluation.benchmark_scoring import _classifier
from image_text.model.architecture import build_open_clip
from image_text.model.clip_model import ClipMagModel
from image_text.model.config import ClipModelConfig

CLASSNAMES = ["face smiling", "animal mammal", "transport air", "flag"]
TEMPLATES = list(emoji.TEMPLATES)  # the emoji set's own prompts (CLIP-benchmark takes a list)


@pytest.fixture(scope="module")
def micro():
    """An untrained clipmag-micro (its text norms differ by prompt) and its tokenizer."""
    torch.manual_seed(0)
    clip, _, _, tokenizer = build_open_clip(ClipModelConfig(name="clipmag-micro"))
    return clip, tokenizer


def model_under(clip, head: str, query_side: str = "image") -> ClipMagModel:
    return ClipMagModel(clip, build_head(head), InfoNCE(scale=20.0), query_side, "clipmag-micro").eval()


def by_hand(model: ClipMagModel, tokenizer) -> tuple[torch.Tensor, torch.Tensor]:
    """Each class's unit mean direction [C, D] and its prompts' mean norm [C], from raw features."""
    directions, norms = [], []
    with torch.no_grad():
        for name in CLASSNAMES:
            raw = model.encode_text(tokenizer([t.format(c=name) for t in TEMPLATES]))
            mean_direction = sum(row / row.norm() for row in raw) / len(raw)
            directions.append(mean_direction / mean_direction.norm())
            norms.append(sum(row.norm() for row in raw) / len(raw))
    return torch.stack(directions), torch.stack(norms)


def test_class_embedding_is_mean_direction_times_mean_norm(micro):
    clip, tokenizer = micro
    model = model_under(clip, "qnorm")
    classes = _classifier(model, tokenizer, CLASSNAMES, TEMPLATES, "cpu", amp=False)
    direction, norm = by_hand(model, tokenizer)
    torch.testing.assert_close(classes, direction * norm[:, None], rtol=1e-5, atol=1e-6)
    # the direction is CLIP-benchmark's own classifier ([D, C], unit columns)
    reference = zero_shot_classifier(model, tokenizer, CLASSNAMES, TEMPLATES, "cpu", amp=False)
    torch.testing.assert_close(F.normalize(classes, dim=-1), reference.t(), rtol=1e-5, atol=1e-6)
    # the rejected rule, the raw mean, is shorter wherever the prompts disagree in direction
    with torch.no_grad():
        raw_mean = torch.stack(
            [model.encode_text(tokenizer([t.format(c=n) for t in TEMPLATES])).mean(0) for n in CLASSNAMES]
        )
    assert (raw_mean.norm(dim=-1) < classes.norm(dim=-1)).all()


@pytest.mark.parametrize(
    ("head", "query_side"),
    [
        ("cosine", "image"),
        ("dot", "image"),
        ("qnorm", "image"),
        ("dnorm", "image"),
        ("qnorm", "text"),
        ("dnorm", "text"),
    ],
)
def test_each_head_scores_a_class_as_docs_say(micro, head, query_side):
    """score(i, c) = |i|^a |t_c|^b cos(i, t_c): a, b per head and query side (docs/clip.md's table)."""
    clip, tokenizer = micro
    model = model_under(clip, head, query_side)
    classes = _classifier(model, tokenizer, CLASSNAMES, TEMPLATES, "cpu", amp=False)
    direction, norm = by_hand(model, tokenizer)
    images = (
        torch.randn(5, classes.shape[1], generator=torch.Generator().manual_seed(1)) * torch.arange(1.0, 6.0)[:, None]
    )
    cosine = F.normalize(images, dim=-1) @ direction.t()
    keeps_image = head == "dot" or (head, query_side) in {("dnorm", "image"), ("qnorm", "text")}
    keeps_class = head == "dot" or (head, query_side) in {("qnorm", "image"), ("dnorm", "text")}
    expected = cosine * (images.norm(dim=-1, keepdim=True) if keeps_image else 1) * (norm if keeps_class else 1)
    with torch.no_grad():
        torch.testing.assert_close(model.similarity(images, classes), expected, rtol=1e-5, atol=1e-5)
