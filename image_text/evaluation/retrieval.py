"""Head-aware image-text retrieval: the columns of docs/method.md section 5 (zero-shot accuracy is
:mod:`image_text.evaluation.zero_shot`), and the printed summary of both.

Stock CLIP evaluation (and CLIP-benchmark) L2-normalises both towers, so it measures cosine
whatever the model was trained with. Here every number is computed twice: with cosine and with the
model's own head on the raw features, with the trained query side (``ClipMagModel.similarity``).
Both retrieval directions rank the same [images x texts] score matrix, along rows (I->T) or
columns (T->I), which is what the loss optimised.

Protocol (COCO / Flickr30k, as CLIP-benchmark and the CLIP papers count it): an image has several
captions; I->T R@k is the fraction of images with *any* of their captions among their top k texts,
T->I R@k the fraction of captions whose image is among their top k images; a candidate that ties
with the match ranks above it (``recall_hits``), and the queries a tie decided are counted
(``*_tied_r<k>_*``). ``image_text_recall`` is
the one scorer every CLIP evaluation here goes through; which caption belongs to which image comes
from the data (``image_of_text``), never from comparing caption strings. Every query's outcome is
kept too (``retrieval_outcomes``), for the sweep report's query-level tests.

Cohen's d of norms (docs/method.md section 3 asks us to define the unmatched set). For every query we
compare the raw norm of its highest-cosine matched candidate with that of its *hardest unmatched*
candidate (the highest-cosine non-match): one value per query in each group. d > 0 means matched
candidates are longer than the distractors cosine confuses them with, i.e. magnitude carries
retrieval signal. ``text_norm_d``: texts as candidates of image queries; ``image_norm_d``: images for
text queries.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from clipmag.runtime.precision import autocast, autocast_dtype
from clipmag.scoring.diagnostics import cohens_d
from clipmag.scoring.heads import build_head

from ..model.clip_model import ClipMagModel

RECALL_KS: tuple[int, ...] = (1, 5, 10)
OUTCOME_KS: tuple[int, ...] = (1, 5)  # the per-query outcomes a results file keeps (it stays small on COCO)
DIRECTIONS = {"I->T": "i2t", "T->I": "t2i"}
COHENS_D_DEFINITION = "highest-cosine matched candidate vs the highest-cosine unmatched candidate, one pair per query"


@torch.no_grad()
def encode(
    fn: Callable[[torch.Tensor], torch.Tensor],
    inputs: torch.Tensor,
    batch_size: int,
    device: torch.device,
    precision: str = "auto",
) -> torch.Tensor:
    """Raw float32 features of ``inputs`` on the CPU, in batches.

    The towers compute in ``precision`` (``clipmag.runtime.precision``: ``auto`` is bf16 autocast where the
    hardware runs bf16 natively); the features are returned in fp32 either way.
    """
    with autocast(device, autocast_dtype(precision, device)):
        out = [fn(inputs[i : i + batch_size].to(device)).float().cpu() for i in range(0, inputs.shape[0], batch_size)]
    return torch.cat(out)


def _check_recall_inputs(scores: torch.Tensor, image_of_text: torch.Tensor, ks: Sequence[int]) -> None:
    """Reject inputs that would give numbers without meaning, naming what was expected."""
    if scores.ndim != 2:
        raise ValueError(f"scores must be [N_images, N_texts], got shape {tuple(scores.shape)}")
    n_images, n_texts = scores.shape
    if image_of_text.ndim != 1 or image_of_text.shape[0] != n_texts:
        raise ValueError(f"image_of_text must have one entry per text ({n_texts}), got {tuple(image_of_text.shape)}")
    if image_of_text.is_floating_point() or image_of_text.dtype == torch.bool:
        raise ValueError(f"image_of_text must hold integer image rows, got dtype {image_of_text.dtype}")
    if n_texts and (int(image_of_text.min()) < 0 or int(image_of_text.max()) >= n_images):
        raise ValueError(
            f"image_of_text must lie in [0, {n_images}), got values in "
            f"[{int(image_of_text.min())}, {int(image_of_text.max())}]"
        )
    captioned = torch.zeros(n_images, dtype=torch.bool).index_fill_(0, image_of_text.cpu().long(), True)
    if not bool(captioned.all()):
        missing = torch.nonzero(~captioned).flatten()[:5].tolist()
        raise ValueError(
            f"{int((~captioned).sum())} image rows have no text (first: {missing}); "
            "I->T recall would count them as misses"
        )
    if not ks or any(int(k) < 1 for k in ks):
        raise ValueError(f"ks must be positive integers, got {tuple(ks)}")
    if torch.isnan(scores).any():
        raise ValueError("scores hold NaN: the ranking, and so the recall, would be arbitrary")


def _ranks(scores: torch.Tensor, relevant: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row (a query): how many non-matching candidates score above its best match, and how many
    score exactly the same."""
    best = scores.masked_fill(~relevant, -torch.inf).max(dim=1, keepdim=True).values
    others = scores.masked_fill(relevant, -torch.inf)
    return (others > best).sum(dim=1), (others == best).sum(dim=1)


def recall_hits(
    scores: torch.Tensor, image_of_text: torch.Tensor, ks: Sequence[int] = RECALL_KS
) -> dict[str, torch.Tensor]:
    """Per query, whether it is a hit at each k: ``{"I->T R@k": [N_images] bool, "T->I R@k": [N_texts]
    bool}`` (the COCO/Flickr protocol; arguments as :func:`image_text_recall`).

    Ties: a non-matching candidate that scores exactly as the query's best match ranks above it
    (the pessimistic rule), so a hit never depends on the order candidates are stored in;
    :func:`tied_queries` counts the queries a tie decides."""
    _check_recall_inputs(scores, image_of_text, ks)
    ranks = {name: above + tied for name, (above, tied) in _direction_ranks(scores, image_of_text).items()}
    return {f"{name} R@{k}": ranks[name] < k for k in ks for name in ranks}


def _direction_ranks(scores: torch.Tensor, image_of_text: torch.Tensor) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """``_ranks`` of image queries over texts (I->T) and of text queries over images (T->I)."""
    scores = scores.float()
    owner = image_of_text.to(scores.device).long()
    relevant = owner[None, :] == torch.arange(scores.shape[0], device=scores.device)[:, None]
    return {"I->T": _ranks(scores, relevant), "T->I": _ranks(scores.t(), relevant.t())}


def tied_queries(scores: torch.Tensor, image_of_text: torch.Tensor, k: int) -> dict[str, int]:
    """Per direction, the queries whose hit at ``k`` a tie decides: a hit if the match ranked first
    among its equals, a miss under the pessimistic rule of :func:`recall_hits`."""
    _check_recall_inputs(scores, image_of_text, (k,))
    return {
        name: int(((above < k) & (above + tied >= k)).sum())
        for name, (above, tied) in _direction_ranks(scores, image_of_text).items()
    }


def image_text_recall(
    scores: torch.Tensor, image_of_text: torch.Tensor, ks: Sequence[int] = RECALL_KS
) -> dict[str, float]:
    """Recall@k in both directions in the COCO/Flickr protocol, as fractions.

    ``scores`` [N_images, N_texts], higher is better; ``image_of_text`` [N_texts] the image row of
    each text (any order, any number of texts per image, every image with at least one). Returns
    ``{"I->T R@k": ..., "T->I R@k": ...}`` for each k: an image is a hit when any of its texts is in
    its top k, a text when its image is in its top k.
    """
    return {name: float(hit.float().mean()) for name, hit in recall_hits(scores, image_of_text, ks).items()}


def hardest_negative_norm_d(cos: torch.Tensor, relevant: torch.Tensor, candidate_norms: torch.Tensor) -> float:
    """Cohen's d of matched-candidate norms vs hardest-unmatched-candidate norms (rows = queries)."""
    has_match = relevant.any(dim=1) & (~relevant).any(dim=1)
    cos, relevant = cos[has_match], relevant[has_match]
    matched = cos.masked_fill(~relevant, -torch.inf).argmax(dim=1)
    hardest = cos.masked_fill(relevant, -torch.inf).argmax(dim=1)
    return cohens_d(candidate_norms[matched], candidate_norms[hardest])


def _scored(model: ClipMagModel, image_features: torch.Tensor, text_features: torch.Tensor) -> dict[str, torch.Tensor]:
    """The [images x texts] scores with cosine and with the model's head (its trained query side)."""
    return {
        "cosine": model.similarity(image_features, text_features, build_head("cosine")),
        "head": model.similarity(image_features, text_features),
    }


def retrieval_outcomes(
    model: ClipMagModel, image_features: torch.Tensor, text_features: torch.Tensor, image_of_text: torch.Tensor
) -> dict[str, dict[str, float]]:
    """Each query's hits (1.0 / 0.0) at ``OUTCOME_KS``, for query-level tests: ``image-<row>`` holds
    ``i2t_r<k>_<scoring>``, ``text-<row>`` holds ``t2i_r<k>_<scoring>``, with cosine and with the head."""
    out: dict[str, dict[str, float]] = {}
    for scoring, sim in _scored(model, image_features, text_features).items():
        for name, hits in recall_hits(sim, image_of_text, OUTCOME_KS).items():
            direction, k = name.split(" R@")
            side = "image" if direction == "I->T" else "text"
            for row, hit in enumerate(hits.tolist()):
                out.setdefault(f"{side}-{row}", {})[f"{DIRECTIONS[direction]}_r{k}_{scoring}"] = float(hit)
    return out


def retrieval_metrics(
    model: ClipMagModel, image_features: torch.Tensor, text_features: torch.Tensor, image_of_text: torch.Tensor
) -> dict[str, float]:
    """R@k both directions with cosine and the head (``i2t_r1_cosine``, ``t2i_r5_head``, ...),
    the mean R@1, and Cohen's d of both towers' norms."""
    out: dict[str, float] = {}
    scored = _scored(model, image_features, text_features)
    for scoring, sim in scored.items():
        for name, value in image_text_recall(sim, image_of_text).items():
            direction, k = name.split(" R@")
            out[f"{DIRECTIONS[direction]}_r{k}_{scoring}"] = value
        for k in RECALL_KS:  # how many queries the pessimistic tie rule decided (0 without ties)
            for direction, count in tied_queries(sim, image_of_text, k).items():
                out[f"{DIRECTIONS[direction]}_tied_r{k}_{scoring}"] = float(count)
    out["mean_r1_head"] = (out["i2t_r1_head"] + out["t2i_r1_head"]) / 2
    out["mean_r1_cosine"] = (out["i2t_r1_cosine"] + out["t2i_r1_cosine"]) / 2
    cos = scored["cosine"].float()
    relevant = image_of_text.long()[None, :] == torch.arange(len(image_features))[:, None]
    out["text_norm_d"] = hardest_negative_norm_d(cos, relevant, text_features.norm(dim=1))
    out["image_norm_d"] = hardest_negative_norm_d(cos.t(), relevant.t(), image_features.norm(dim=1))
    out["image_norm_mean"] = float(image_features.norm(dim=1).mean())
    out["text_norm_mean"] = float(text_features.norm(dim=1).mean())
    out["n_images"], out["n_texts"] = float(len(image_features)), float(len(text_features))
    return out


def format_results(metrics: dict[str, float], head_name: str) -> str:
    """The printed summary: R@1/5/10 in both directions with cosine and with the head."""
    col = f"head:{head_name}"
    lines = [f"{'':<12}{'cosine':>10}{col:>16}"]
    for direction, key in DIRECTIONS.items():
        for k in RECALL_KS:
            c, h = metrics.get(f"{key}_r{k}_cosine"), metrics.get(f"{key}_r{k}_head")
            if c is not None:
                lines.append(f"{direction + f' R@{k}':<12}{100 * c:>10.2f}{100 * h:>16.2f}")
    if "zeroshot_acc1_cosine" in metrics:
        cosine, head = metrics["zeroshot_acc1_cosine"], metrics["zeroshot_acc1_head"]
        lines.append(f"{'zero-shot':<12}{100 * cosine:>10.2f}{100 * head:>16.2f}")
    tied = {name: int(value) for name, value in metrics.items() if "_tied_" in name and value}
    if tied:
        lines.append("queries a tie decided (counted as misses): " + ", ".join(f"{k} {v}" for k, v in tied.items()))
    if "text_norm_d" in metrics:
        text_d, image_d = metrics["text_norm_d"], metrics["image_norm_d"]
        lines.append(f"Cohen's d of norms ({COHENS_D_DEFINITION}): text {text_d:+.3f}, image {image_d:+.3f}")
    if metrics.get("n_images"):
        n_images, n_texts = int(metrics["n_images"]), int(metrics["n_texts"])
        lines.insert(
            0,
            f"retrieval over {n_images} images and {n_texts} captions (chance R@1 {100 / n_images:.2f}% "
            "both ways), values in %",
        )
    return "\n".join(lines)
