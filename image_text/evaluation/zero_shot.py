"""Zero-shot classification, head-aware: each image's class with cosine and with the model's head.

Zero-shot classification ranks class embeddings for each image, in the model's trained roles (the
classes are texts); a class embedding is its prompts' mean direction times their mean norm
(``class_embeddings``). Every image's outcome is kept too (``zero_shot_outcomes``, as
``retrieval_outcomes`` keeps each retrieval query's), for the sweep report's query-level tests.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from clipmag.scoring.heads import build_head

from ..model.clip_model import ClipMagModel


def class_embeddings(prompt_features: torch.Tensor) -> torch.Tensor:
    """Class embeddings [..., D] from the raw features of each class's prompts [..., T, D]: the mean
    direction of the prompts (CLIP-benchmark's and open_clip's classifier, exactly) times their
    mean norm (the magnitude the model gives the class's prompts, whatever their spread in
    direction). docs/clip.md says why."""
    features = prompt_features.float()
    direction = F.normalize(F.normalize(features, dim=-1).mean(dim=-2), dim=-1)
    return direction * features.norm(dim=-1).mean(dim=-1, keepdim=True)


@torch.no_grad()
def zero_shot_predictions(
    model: ClipMagModel, image_features: torch.Tensor, prompt_features: torch.Tensor, n_classes: int
) -> dict[str, torch.Tensor]:
    """Each image's class with cosine and with the head (``{"cosine": ..., "head": ...}``): the class
    whose embedding scores highest against the image, in the model's trained roles (the classes are
    the texts, ranked for the image as in I->T retrieval). ``prompt_features``: raw features of
    :func:`image_text.data.prompts.zero_shot_prompts`."""
    classes = class_embeddings(prompt_features.view(n_classes, -1, prompt_features.shape[1]))
    return {
        scoring: model.similarity(image_features, classes, head).argmax(dim=1)
        for scoring, head in (("cosine", build_head("cosine")), ("head", None))
    }


def zero_shot_metrics(predictions: dict[str, torch.Tensor], labels: torch.Tensor) -> dict[str, float]:
    """Zero-shot top-1 accuracy and mean per-class recall of each scoring's predictions."""
    out: dict[str, float] = {}
    for scoring, pred in predictions.items():
        out[f"zeroshot_acc1_{scoring}"] = float((pred == labels).float().mean())
        recalls = [float((pred[labels == c] == c).float().mean()) for c in labels.unique().tolist()]
        out[f"zeroshot_mean_per_class_recall_{scoring}"] = float(np.mean(recalls))
    return out


def zero_shot_outcomes(predictions: dict[str, torch.Tensor], labels: torch.Tensor) -> dict[str, dict[str, float]]:
    """Each image's zero-shot hit (``zeroshot-<row>``: ``zeroshot_acc1_<scoring>``), for query-level tests."""
    out: dict[str, dict[str, float]] = {}
    for scoring, pred in predictions.items():
        for row, hit in enumerate((pred == labels).tolist()):
            out.setdefault(f"zeroshot-{row}", {})[f"zeroshot_acc1_{scoring}"] = float(hit)
    return out
