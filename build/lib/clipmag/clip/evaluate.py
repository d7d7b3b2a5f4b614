"""Head-aware image-text evaluation: the columns of docs/method.md section 5, plus zero-shot accuracy.

Stock CLIP evaluation (and CLIP-benchmark) L2-normalises both towers, so it measures cosine
whatever the model was trained with. Here every number is computed twice: with cosine and with the
model's own head on the raw features, with the trained query side (``ClipMagModel.similarity``).
Both retrieval directions rank the same [images x texts] score matrix, along rows (I->T) or
columns (T->I), which is what the loss optimised.

Matches. A text is a correct answer for an image when its caption is identical to the image's
caption (with unique captions this is plain index matching; with repeated captions no duplicate
is counted as a miss).

Cohen's d of norms (docs/method.md section 3 asks us to define the unmatched set). For every query we
compare the raw norm of its matched candidate with that of its *hardest unmatched* candidate (the
highest-cosine non-match): one value per query in each group. d > 0 means matched candidates are
longer than the distractors cosine confuses them with, i.e. magnitude carries retrieval signal.
``text_norm_d``: texts as candidates of image queries; ``image_norm_d``: images for text queries.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import torch

from clipmag.diagnostics import cohens_d
from clipmag.heads import build_head

from .model import ClipMagModel

RECALL_KS: tuple[int, ...] = (1, 5, 10)
COHENS_D_DEFINITION = "matched candidate vs the highest-cosine unmatched candidate, one pair per query"


@torch.no_grad()
def encode(fn: Callable[[torch.Tensor], torch.Tensor], inputs: torch.Tensor, batch_size: int, device: torch.device) -> torch.Tensor:
    """Raw float32 features of ``inputs`` on the CPU, in batches."""
    out = [fn(inputs[i : i + batch_size].to(device)).float().cpu() for i in range(0, inputs.shape[0], batch_size)]
    return torch.cat(out)


def caption_relevance(image_captions: Sequence[str], text_captions: Sequence[str]) -> torch.Tensor:
    """Bool [N_images, N_texts]: True where the captions are identical."""
    ids: dict[str, int] = {}
    img = torch.tensor([ids.setdefault(c, len(ids)) for c in image_captions])
    txt = torch.tensor([ids.setdefault(c, len(ids)) for c in text_captions])
    return img[:, None] == txt[None, :]


def recall_at_k(scores: torch.Tensor, relevant: torch.Tensor, ks: Sequence[int] = RECALL_KS) -> dict[int, float]:
    """Fraction of rows with a relevant column among their top k, for each k."""
    top = scores.topk(min(max(ks), scores.shape[1]), dim=1).indices
    hits = relevant.gather(1, top)
    return {k: float(hits[:, :k].any(dim=1).float().mean()) for k in ks}


def hardest_negative_norm_d(cos: torch.Tensor, relevant: torch.Tensor, candidate_norms: torch.Tensor) -> float:
    """Cohen's d of matched-candidate norms vs hardest-unmatched-candidate norms (rows = queries)."""
    has_match = relevant.any(dim=1) & (~relevant).any(dim=1)
    cos, relevant = cos[has_match], relevant[has_match]
    matched = relevant.float().argmax(dim=1)
    hardest = cos.masked_fill(relevant, -torch.inf).argmax(dim=1)
    return cohens_d(candidate_norms[matched], candidate_norms[hardest])


def retrieval_metrics(model: ClipMagModel, image_features: torch.Tensor, text_features: torch.Tensor, relevant: torch.Tensor) -> dict[str, float]:
    """R@k both directions with cosine and the head, and Cohen's d of both towers' norms."""
    out: dict[str, float] = {}
    cosine = build_head("cosine")
    scored = {"cosine": model.similarity(image_features, text_features, cosine), "head": model.similarity(image_features, text_features)}
    for scoring, sim in scored.items():
        for direction, scores, rel in (("i2t", sim, relevant), ("t2i", sim.t(), relevant.t())):
            for k, value in recall_at_k(scores.float(), rel).items():
                out[f"{direction}_r{k}_{scoring}"] = value
    out["mean_r1_head"] = (out["i2t_r1_head"] + out["t2i_r1_head"]) / 2
    out["mean_r1_cosine"] = (out["i2t_r1_cosine"] + out["t2i_r1_cosine"]) / 2
    cos = scored["cosine"].float()
    out["text_norm_d"] = hardest_negative_norm_d(cos, relevant, text_features.norm(dim=1))
    out["image_norm_d"] = hardest_negative_norm_d(cos.t(), relevant.t(), image_features.norm(dim=1))
    out["image_norm_mean"] = float(image_features.norm(dim=1).mean())
    out["text_norm_mean"] = float(text_features.norm(dim=1).mean())
    return out


@torch.no_grad()
def zero_shot_metrics(model: ClipMagModel, image_features: torch.Tensor, labels: torch.Tensor, classnames: Sequence[str],
                      templates: Sequence[str], tokenizer: Callable, device: torch.device) -> dict[str, float]:
    """Zero-shot top-1 accuracy and mean per-class recall with cosine and with the head.

    A class embedding is the mean of its templates' *raw* text features (open_clip averages unit
    vectors instead; averaging raw features keeps the magnitude the head is meant to read).
    """
    prompts = [t.replace("{c}", name).replace("{}", name) for name in classnames for t in templates]
    feats = encode(model.encode_text, tokenizer(prompts), 256, device)
    class_features = feats.view(len(classnames), len(templates), -1).mean(dim=1)
    out: dict[str, float] = {}
    for scoring, head in (("cosine", build_head("cosine")), ("head", None)):
        pred = model.similarity(image_features, class_features, head).argmax(dim=1)
        out[f"zeroshot_acc1_{scoring}"] = float((pred == labels).float().mean())
        recalls = [float((pred[labels == c] == c).float().mean()) for c in labels.unique().tolist()]
        out[f"zeroshot_mean_per_class_recall_{scoring}"] = float(np.mean(recalls))
    return out


def format_results(metrics: dict[str, float], head_name: str, n_pairs: int | None = None) -> str:
    """The printed summary: R@1/5/10 in both directions with cosine and with the head."""
    col = f"head:{head_name}"
    lines = [f"{'':<12}{'cosine':>10}{col:>16}"]
    for direction, label in (("i2t", "I->T"), ("t2i", "T->I")):
        for k in RECALL_KS:
            c, h = metrics.get(f"{direction}_r{k}_cosine"), metrics.get(f"{direction}_r{k}_head")
            if c is not None:
                lines.append(f"{label + f' R@{k}':<12}{100 * c:>10.2f}{100 * h:>16.2f}")
    if "zeroshot_acc1_cosine" in metrics:
        lines.append(f"{'zero-shot':<12}{100 * metrics['zeroshot_acc1_cosine']:>10.2f}{100 * metrics['zeroshot_acc1_head']:>16.2f}")
    if "text_norm_d" in metrics:
        lines.append(f"Cohen's d of norms ({COHENS_D_DEFINITION}): text {metrics['text_norm_d']:+.3f}, image {metrics['image_norm_d']:+.3f}")
    if n_pairs:
        lines.insert(0, f"retrieval over {n_pairs} test pairs (chance R@1 {100 / n_pairs:.2f}%), values in %")
    return "\n".join(lines)
