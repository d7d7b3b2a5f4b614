"""Predict, before any fine-tuning, whether ``qnorm`` or ``dnorm`` suits a pretrained text encoder.

Two predictors, both cheap enough for a CPU (about a minute for MiniLM on 200 pairs at length 64):

**Query-norm CV ratio (the paper's v1 predictor, as a short probe; exploratory)**: see
:mod:`text_retrieval.predict.probe`.

**Scale-free log-magnitude Fisher condition number (our own definition; the paper's v2 is not public).**
On the pretrained encoder (no training), embed the n pairs; rescale each side by the geometric
mean of its norms (so log-norms are centred and the predictor ignores a model's absolute norm
scale). Give each side s in {query, document} a two-parameter log-magnitude model
``log|x_i| -> a_s + (1 + b_s) * log|x_i|`` (a global temperature shift a_s and a gain b_s on the
example's own log-norm), evaluated at ``a = b = 0``. The loss is q2d InfoNCE under the ``dot``
head (the one head in which both magnitudes enter the logits), scale 20, in-batch negatives over
seeded batches of ``fisher_batch_size``. For each side the empirical Fisher is the 2x2 matrix
``F_s = mean_i g_i g_i^T`` of the per-query gradients ``g_i = d loss_i / d(a_s, b_s)``. Its
eigenvalues depend on the units of a and b (measure b in other units, or log-norms in another
base, and the plain condition number moves, even across sides), so we condition the correlation
matrix instead: ``rho_s = F_ab / sqrt(F_aa F_bb)`` and ``kappa_s = (1 + |rho_s|) / (1 - |rho_s|)``,
unchanged by any rescaling of a or b. ``|rho_s|`` near 1 means the gain's gradient is the shift's
over again: the loss cannot tell that side's per-example magnitudes apart from a global
temperature, so its norms carry little learnable signal (a gain with no gradient at all counts as
``|rho| = 1``, kappa infinite). Verdict: free the better-conditioned side - ``dnorm`` (query
magnitude kept) when ``kappa_query < kappa_document``, else ``qnorm``.

The command line (``scripts/predict_norm.py``) lives in :mod:`text_retrieval.predict.cli`.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from clipmag.scoring.heads import build_head
from clipmag.scoring.losses import InfoNCE
from text_retrieval.model.encoder import TextEncoder
from text_retrieval.predict.config import DCV_THRESHOLD
from text_retrieval.predict.probe import SCALE, query_cv_probe, seeded_batches

logger = logging.getLogger("clipmag")

__all__ = ["predict_norm", "correlation_condition", "fisher_verdict", "magnitude_fisher"]


def _centred(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Unit directions and log-norms centred to mean 0 (rescaling the side by its geometric-mean norm).

    Norms equal to rounding (a normalised encoder) give exactly zero log-norms, so the gain's
    Fisher entry is exactly 0 rather than rounding noise that the correlation would magnify."""
    log_norm = torch.log(x.norm(dim=-1).clamp_min(1e-12))
    centred = log_norm - log_norm.mean()
    if centred.abs().max() < 1e-12:
        centred = torch.zeros_like(centred)
    return x / log_norm.exp().unsqueeze(-1), centred


def magnitude_fisher(
    queries: torch.Tensor, documents: torch.Tensor, batches: Sequence[Sequence[int]], scale: float = SCALE
) -> dict[str, np.ndarray]:
    """The 2x2 empirical Fisher of each side's log-magnitude parameters (a, b); see the module docstring.

    ``queries`` and ``documents`` are raw embeddings [n, D] of n pairs; ``batches`` index the pairs
    that share in-batch negatives. Per-query gradients come from autograd through ``InfoNCE`` on the
    ``dot`` head, scoring query i against its batch's documents with its positive first.
    """
    q_dir, q_log = _centred(queries.detach().double())
    d_dir, d_log = _centred(documents.detach().double())
    loss_fn, dot = InfoNCE(scale=scale, direction="q2d", gather=False).eval(), build_head("dot")
    grads: dict[str, list[torch.Tensor]] = {"query": [], "document": []}
    for batch in batches:
        for i in batch:
            params = {side: torch.zeros(2, dtype=torch.float64, requires_grad=True) for side in grads}
            order = [i] + [j for j in batch if j != i]
            a, b = params["query"]
            q = q_dir[i : i + 1] * torch.exp(a + (1.0 + b) * q_log[i : i + 1]).unsqueeze(-1)
            a, b = params["document"]
            d = d_dir[order] * torch.exp(a + (1.0 + b) * d_log[order]).unsqueeze(-1)
            loss = loss_fn(q, d.unsqueeze(0), dot)["loss"]
            g_q, g_d = torch.autograd.grad(loss, [params["query"], params["document"]])
            grads["query"].append(g_q)
            grads["document"].append(g_d)
    out = {}
    for side, rows in grads.items():
        g = torch.stack(rows)
        out[side] = (g.T @ g / g.shape[0]).numpy()
    return out


def correlation_condition(fisher: np.ndarray) -> dict[str, float]:
    """|rho| and kappa = (1 + |rho|) / (1 - |rho|) of a 2x2 Fisher normalised to a correlation matrix."""
    f = np.asarray(fisher, dtype=np.float64)
    if f.shape != (2, 2):
        raise ValueError(f"expected a 2x2 Fisher matrix, got shape {f.shape}")
    if not f[0, 0] > 0 and not f[1, 1] > 0:
        raise ValueError("the Fisher matrix is zero: the loss does not depend on the magnitudes of this data")
    # a parameter without gradient is not identified at all: as confounded as it can be
    rho = min(abs(f[0, 1]) / math.sqrt(f[0, 0] * f[1, 1]), 1.0) if f[0, 0] > 0 and f[1, 1] > 0 else 1.0
    return {"abs_rho": float(rho), "kappa": math.inf if rho == 1.0 else (1.0 + rho) / (1.0 - rho)}


def fisher_verdict(fisher: dict[str, np.ndarray]) -> dict[str, Any]:
    """kappa of each side's Fisher and the verdict (dnorm when the query side is better conditioned)."""
    conds = {side: correlation_condition(fisher[side]) for side in ("query", "document")}
    kq, kd = conds["query"]["kappa"], conds["document"]["kappa"]
    return {
        "kappa_query": kq,
        "kappa_document": kd,
        "abs_rho_query": conds["query"]["abs_rho"],
        "abs_rho_document": conds["document"]["abs_rho"],
        "verdict": "dnorm" if kq < kd else "qnorm",
    }


def fisher_predictor(
    embeddings: tuple[np.ndarray, np.ndarray], *, batch_size: int = 32, seed: int = 0
) -> dict[str, Any]:
    """The scale-free Fisher predictor on the raw (query, document) embeddings of the pairs."""
    batches = seeded_batches(len(embeddings[0]), batch_size, seed)
    if not batches:
        raise ValueError(f"the Fisher predictor needs at least 2 pairs, got {len(embeddings[0])}")
    fisher = magnitude_fisher(torch.from_numpy(embeddings[0]), torch.from_numpy(embeddings[1]), batches)
    return {
        **fisher_verdict(fisher),
        "fisher_query": fisher["query"].tolist(),
        "fisher_document": fisher["document"].tolist(),
        "definition": (
            "per side, 2x2 empirical Fisher F of q2d InfoNCE (dot head, scale 20, in-batch negatives) w.r.t. "
            "(a, b) in log|x| -> a + (1+b) log|x| at 0, norms rescaled to geometric mean 1; "
            "rho = F_ab / sqrt(F_aa F_bb), kappa = (1+|rho|)/(1-|rho|), unchanged by rescaling a or b; "
            "dnorm if kappa_query < kappa_document (our definition, not the paper's)"
        ),
    }


def predict_norm(
    encoder: TextEncoder,
    queries: Sequence[str],
    documents: Sequence[str],
    *,
    seed: int = 0,
    probe_steps: int = 4,
    probe_lr: float = 1e-4,
    probe_batch_size: int = 16,
    fisher_batch_size: int = 32,
    dcv_threshold: float = DCV_THRESHOLD,
) -> dict[str, Any]:
    """Both predictors on n (query, positive document) pairs, encoded once; a JSON-ready dict with timings."""
    if len(queries) != len(documents):
        raise ValueError(f"{len(queries)} queries but {len(documents)} documents")
    torch.manual_seed(seed)
    start = time.perf_counter()
    embeddings = (
        encoder.encode(queries, "query", show_progress=False),
        encoder.encode(documents, "document", show_progress=False),
    )
    encode_seconds = time.perf_counter() - start
    start = time.perf_counter()
    fisher = fisher_predictor(embeddings, batch_size=fisher_batch_size, seed=seed)
    fisher["seconds"] = time.perf_counter() - start
    start = time.perf_counter()
    logger.info("query-norm probe: %d steps under dnorm and under dot", probe_steps)
    dcv = query_cv_probe(
        encoder,
        queries,
        documents,
        steps=probe_steps,
        lr=probe_lr,
        batch_size=probe_batch_size,
        seed=seed,
        threshold=dcv_threshold,
        pretrained_queries=embeddings[0],
    )
    dcv["seconds"] = time.perf_counter() - start
    settings = {
        "n_pairs": len(queries),
        "seed": seed,
        "pooling": encoder.pooling,
        "query_max_length": encoder.query_max_length,
        "document_max_length": encoder.document_max_length,
        "probe_steps": probe_steps,
        "probe_lr": probe_lr,
        "probe_batch_size": probe_batch_size,
        "fisher_batch_size": fisher_batch_size,
        "scale": SCALE,
        "encode_seconds": encode_seconds,
    }
    return {"settings": settings, "query_cv_ratio": dcv, "fisher": fisher}
