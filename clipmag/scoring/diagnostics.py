"""Magnitude diagnostics of docs/method.md section 3: norm spread, Cohen's d, effective temperature.

Always computed on raw (untransformed) embeddings: for a cosine model the norms before
normalisation are what tells whether the encoder puts information into magnitude.

Cohen's d of document norms (the paper leaves the non-relevant set undefined) is defined here as:
raw norms of every document judged relevant (gain > 0) to some evaluated query, versus a uniform
random sample, without replacement, of ``nonrelevant_sample`` documents (default 1,000, or all
if fewer) drawn with ``numpy.random.default_rng(seed)`` from the corpus documents judged relevant
to no query of the split (:func:`document_norm_effect`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from clipmag.scoring.heads import SimilarityHead

ArrayLike = torch.Tensor | np.ndarray | Sequence[float]


def _as_float64(values: ArrayLike) -> np.ndarray:
    if isinstance(values, torch.Tensor):
        values = values.detach().to("cpu", torch.float64).numpy()
    return np.asarray(values, dtype=np.float64).reshape(-1)


def row_norms(embeddings: torch.Tensor | np.ndarray) -> np.ndarray:
    """L2 norm of every row, as float64."""
    if isinstance(embeddings, torch.Tensor):
        return embeddings.detach().to("cpu", torch.float64).norm(dim=-1).numpy()
    return np.linalg.norm(np.asarray(embeddings, dtype=np.float64), axis=-1)


def norm_stats(norms: ArrayLike) -> dict[str, float]:
    """Mean, standard deviation and coefficient of variation (std / mean) of a set of norms.

    CV >= ~0.1 means an encoder uses magnitude; <= 0.05 is noise (docs/method.md section 3).
    """
    x = _as_float64(norms)
    if x.size == 0:
        raise ValueError("norm_stats needs at least one value")
    mean = float(x.mean())
    std = float(x.std(ddof=1)) if x.size > 1 else 0.0
    return {"mean": mean, "std": std, "cv": std / mean if mean > 0 else math.nan}


def cohens_d(group_a: ArrayLike, group_b: ArrayLike) -> float:
    """(mean_a - mean_b) / pooled sd, pooled sd = sqrt(((na-1)sa^2 + (nb-1)sb^2) / (na+nb-2))."""
    a, b = _as_float64(group_a), _as_float64(group_b)
    if a.size < 2 or b.size < 2:
        raise ValueError(f"Cohen's d needs at least 2 values per group, got {a.size} and {b.size}")
    pooled_var = ((a.size - 1) * a.var(ddof=1) + (b.size - 1) * b.var(ddof=1)) / (a.size + b.size - 2)
    if pooled_var == 0:
        return 0.0 if a.mean() == b.mean() else math.copysign(math.inf, a.mean() - b.mean())
    return float((a.mean() - b.mean()) / math.sqrt(pooled_var))


def effect_size_band(d: float) -> str:
    """Cohen's conventional bands: large >= 0.8, medium >= 0.5, small >= 0.2, else negligible."""
    size = abs(d)
    if size >= 0.8:
        return "large"
    if size >= 0.5:
        return "medium"
    if size >= 0.2:
        return "small"
    return "negligible"


def effective_scale(scale: float, query_norms: ArrayLike, doc_norms: ArrayLike, gq: float, gd: float) -> float:
    """Mean multiplier of cos(theta) in the logits: scale * E|q|^(1-gq) * E|d|^(1-gd).

    Under dnorm this is scale * mean|q| (Prop. 4.2: the query norm is an inverse temperature);
    under cosine it is the scale itself.
    """
    q, d = _as_float64(query_norms), _as_float64(doc_norms)
    return float(scale * np.mean(q ** (1.0 - gq)) * np.mean(d ** (1.0 - gd)))


def magnitude_summary(
    queries: torch.Tensor, documents: torch.Tensor, head: SimilarityHead, scale: float
) -> dict[str, float]:
    """Flat dict of the per-step diagnostics both trainers log."""
    qn, dn = row_norms(queries), row_norms(documents)
    qs, ds = norm_stats(qn), norm_stats(dn)
    gq, gd = head.gammas()
    eff = effective_scale(scale, qn, dn, gq, gd)
    return {
        "q_norm_mean": qs["mean"],
        "q_norm_cv": qs["cv"],
        "d_norm_mean": ds["mean"],
        "d_norm_cv": ds["cv"],
        "gamma_q": gq,
        "gamma_d": gd,
        "effective_scale": eff,
        "effective_temperature": 1.0 / eff if eff > 0 else math.inf,
    }


COHENS_D_DEFINITION = (
    "raw L2 norms of documents judged relevant (gain > 0) to any evaluated query vs a seeded uniform "
    "random sample (without replacement) of corpus documents judged relevant to no query of the split"
)


def document_norm_effect(
    doc_norms: np.ndarray,
    doc_ids: Sequence[str],
    relevant: set[str],
    nonrelevant_sample: int = 1000,
    seed: int = 0,
    keep_norms: bool = False,
) -> dict[str, Any]:
    """Cohen's d of document norms, relevant vs a seeded sample of never-relevant documents.

    ``keep_norms`` adds both groups' norms (bounded: relevant docs plus the fixed-size sample),
    which the sweep report draws as histograms.
    """
    is_relevant = np.fromiter((d in relevant for d in doc_ids), dtype=bool, count=len(doc_ids))
    pool = np.flatnonzero(~is_relevant)
    rng = np.random.default_rng(seed)
    sample = rng.choice(pool, size=min(nonrelevant_sample, pool.size), replace=False) if pool.size else pool
    rel_norms, non_norms = doc_norms[is_relevant], doc_norms[np.sort(sample)]
    result: dict[str, Any] = {
        "definition": COHENS_D_DEFINITION,
        "seed": seed,
        "num_relevant": int(rel_norms.size),
        "num_nonrelevant_sampled": int(non_norms.size),
        "nonrelevant_pool": int(pool.size),
    }
    if rel_norms.size >= 2 and non_norms.size >= 2:
        d = cohens_d(rel_norms, non_norms)
        result.update(
            {
                "cohens_d": d,
                "band": effect_size_band(d),
                "relevant_norm_mean": float(rel_norms.mean()),
                "nonrelevant_norm_mean": float(non_norms.mean()),
            }
        )
    else:
        result.update({"cohens_d": None, "band": "undefined (fewer than 2 documents in a group)"})
    if keep_norms:
        result.update({"relevant_norms": rel_norms.round(5).tolist(), "nonrelevant_norms": non_norms.round(5).tolist()})
    return result
