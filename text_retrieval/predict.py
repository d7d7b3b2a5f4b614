"""Predict, before any fine-tuning, whether ``qnorm`` or ``dnorm`` suits a pretrained text encoder.

Two predictors, both cheap enough for a CPU (about a minute for MiniLM on 200 pairs at length 64):

**Query-norm CV ratio (the paper's v1 predictor, operationalised as a probe).**
docs/method.md section 3 defines ``dCV = CV(query norms under dnorm) / CV(query norms under dot)``
after fine-tuning (Contriever 0.5-2x preferred qnorm, RetroMAE 4-9x preferred dnorm). The norms of
an untuned model do not depend on the head, so we measure the ratio after a short *probe*: two
copies of the encoder each take ``probe_steps`` AdamW steps (lr ``probe_lr``, betas 0.9/0.98,
weight decay 0.01, gradient clipping 1.0, the paper's optimiser) of q2d InfoNCE (scale 20,
in-batch negatives, batches of ``probe_batch_size`` seeded pairs) under ``dnorm`` and under
``dot``, with dropout off so the probe is deterministic and the token-embedding table frozen (its
dense gradient would cost more than the rest of a CPU step; the norms come from the layers above).
CV = std/mean of the raw query norms of all n probe queries, re-encoded after the probe.
Verdict: ``dnorm`` when dCV exceeds ``dcv_threshold`` (default sqrt(2 * 4) = 2.83, the geometric
midpoint of the paper's two bands), else ``qnorm``. A probe of a few steps moves norms far less
than 30k steps of fine-tuning, so its ratio stays near 1 unless the dnorm gradient spreads query
norms quickly; the threshold is the paper's and has not been calibrated for a probe. The output says so.

**Log-magnitude Fisher condition number (our own definition; the paper's v2 is not public).**
On the pretrained encoder (no training), embed the n pairs; rescale each side by the geometric
mean of its norms (so log-norms are centred and the predictor ignores a model's absolute norm
scale). Give each side s in {query, document} a two-parameter log-magnitude model
``log|x_i| -> a_s + (1 + b_s) * log|x_i|`` (a global temperature shift a_s and a gain b_s on the
example's own log-norm), evaluated at ``a = b = 0``. The loss is q2d InfoNCE under the ``dot``
head (the one head in which both magnitudes enter the logits), scale 20, in-batch negatives over
seeded batches of ``fisher_batch_size``. For each side the empirical Fisher is the 2x2 matrix
``F_s = mean_i g_i g_i^T`` of the per-query gradients ``g_i = d loss_i / d(a_s, b_s)``, and
``kappa_s = (lambda_max + eps) / (lambda_min + eps)`` with ``eps = ridge * trace(F_s) / 2``.
A large ``kappa_s`` means the loss cannot tell that side's per-example magnitudes apart from a
global temperature: its norms carry little learnable signal. Verdict: free the better-conditioned
side - ``dnorm`` (query magnitude kept) when ``kappa_query < kappa_document``, else ``qnorm``.

The command line (``scripts/predict_norm.py``) lives in :mod:`text_retrieval.predict_cli`.
"""

from __future__ import annotations

import copy
import logging
import math
import random
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from clipmag.diagnostics import norm_stats, row_norms
from clipmag.heads import build_head
from clipmag.losses import InfoNCE
from text_retrieval.encoder import TextEncoder

logger = logging.getLogger("clipmag")

__all__ = ["predict_norm", "query_cv_probe", "fisher_condition", "magnitude_fisher", "DCV_THRESHOLD"]

SCALE = 20.0
DCV_THRESHOLD = math.sqrt(2.0 * 4.0)


def _batches(n: int, batch_size: int, seed: int) -> list[list[int]]:
    """A seeded partition of range(n) into batches; a last batch of one pair is dropped (no negatives)."""
    order = list(range(n))
    random.Random(seed).shuffle(order)
    out = [order[i:i + batch_size] for i in range(0, n, batch_size)]
    return [b for b in out if len(b) >= 2]


def _probe_cv(encoder: TextEncoder, head: str, tokens: list[tuple[Any, Any]], queries: Sequence[str],
              steps: int, lr: float, seed: int) -> dict[str, float]:
    """Train a copy of the encoder for ``steps`` under ``head``; norm stats of the queries afterwards."""
    torch.manual_seed(seed)
    model = copy.deepcopy(encoder.model)
    model.get_input_embeddings().weight.requires_grad_(False)  # its dense gradient dominates a CPU step
    probe = TextEncoder(model, encoder.tokenizer, head=build_head(head), pooling=encoder.pooling,
                        query_prefix=encoder.query_prefix, document_prefix=encoder.document_prefix,
                        query_max_length=encoder.query_max_length, document_max_length=encoder.document_max_length)
    loss_fn = InfoNCE(build_head(head), scale=SCALE, direction="q2d", gather=False)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.98), eps=1e-8, weight_decay=0.01, foreach=True)
    model.eval()  # dropout off: the probe must be deterministic
    losses = []
    for step in range(steps):
        q_batch, d_batch = tokens[step % len(tokens)]
        out = loss_fn(probe.embed(q_batch), probe.embed(d_batch))
        optimizer.zero_grad(set_to_none=True)
        out["loss"].backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        losses.append(float(out["loss"].detach()))
    stats = norm_stats(row_norms(probe.encode(queries, "query", show_progress=False)))
    return {**stats, "losses": losses}


def query_cv_probe(encoder: TextEncoder, queries: Sequence[str], documents: Sequence[str], *, steps: int = 4,
                   lr: float = 1e-4, batch_size: int = 16, seed: int = 0, threshold: float = DCV_THRESHOLD,
                   pretrained_queries: np.ndarray | None = None) -> dict[str, Any]:
    """dCV = CV(query norms after a dnorm probe) / CV(after a dot probe); see the module docstring.

    ``pretrained_queries`` (raw query embeddings of the untouched encoder) saves encoding them again.
    """
    batches = _batches(len(queries), batch_size, seed)
    if not batches or steps < 1:
        raise ValueError(f"the probe needs steps >= 1 and at least 2 pairs, got steps={steps}, n={len(queries)}")
    tokens = [(encoder.tokenize([queries[i] for i in b], "query"),
               encoder.tokenize([documents[i] for i in b], "document")) for b in batches]
    if pretrained_queries is None:
        pretrained_queries = encoder.encode(queries, "query", show_progress=False)
    before = norm_stats(row_norms(pretrained_queries))
    after = {head: _probe_cv(encoder, head, tokens, queries, steps, lr, seed) for head in ("dnorm", "dot")}
    dcv = after["dnorm"]["cv"] / after["dot"]["cv"]
    return {
        "dcv": dcv,
        "cv_pretrained": before["cv"],
        "cv_after_dnorm": after["dnorm"]["cv"],
        "cv_after_dot": after["dot"]["cv"],
        "query_norm_mean_pretrained": before["mean"],
        "query_norm_mean_after_dnorm": after["dnorm"]["mean"],
        "query_norm_mean_after_dot": after["dot"]["mean"],
        "probe_losses": {head: after[head]["losses"] for head in after},
        "threshold": threshold,
        "verdict": "dnorm" if dcv > threshold else "qnorm",
        "definition": (f"CV of the n query norms after {steps} AdamW steps (lr {lr}, batch {batch_size}) "
                       "of q2d InfoNCE under dnorm, divided by the same after the same steps under dot; "
                       f"verdict dnorm if > {threshold:.3g} (paper's band midpoint, not calibrated for a short probe)"),
    }


def _centred(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Unit directions and log-norms centred to mean 0 (rescaling the side by its geometric-mean norm)."""
    log_norm = torch.log(x.norm(dim=-1).clamp_min(1e-12))
    return x / log_norm.exp().unsqueeze(-1), log_norm - log_norm.mean()


def magnitude_fisher(queries: torch.Tensor, documents: torch.Tensor, batches: Sequence[Sequence[int]],
                     scale: float = SCALE) -> dict[str, np.ndarray]:
    """The 2x2 empirical Fisher of each side's log-magnitude parameters (a, b); see the module docstring.

    ``queries`` and ``documents`` are raw embeddings [n, D] of n pairs; ``batches`` index the pairs
    that share in-batch negatives. Per-query gradients come from autograd through ``InfoNCE`` on the
    ``dot`` head, scoring query i against its batch's documents with its positive first.
    """
    q_dir, q_log = _centred(queries.detach().double())
    d_dir, d_log = _centred(documents.detach().double())
    loss_fn = InfoNCE(build_head("dot"), scale=scale, direction="q2d", gather=False).eval()
    grads: dict[str, list[torch.Tensor]] = {"query": [], "document": []}
    for batch in batches:
        for i in batch:
            params = {side: torch.zeros(2, dtype=torch.float64, requires_grad=True) for side in grads}
            order = [i] + [j for j in batch if j != i]
            a, b = params["query"]
            q = q_dir[i:i + 1] * torch.exp(a + (1.0 + b) * q_log[i:i + 1]).unsqueeze(-1)
            a, b = params["document"]
            d = d_dir[order] * torch.exp(a + (1.0 + b) * d_log[order]).unsqueeze(-1)
            loss = loss_fn(q, d.unsqueeze(0))["loss"]
            g_q, g_d = torch.autograd.grad(loss, [params["query"], params["document"]])
            grads["query"].append(g_q)
            grads["document"].append(g_d)
    out = {}
    for side, rows in grads.items():
        g = torch.stack(rows)
        out[side] = (g.T @ g / g.shape[0]).numpy()
    return out


def fisher_condition(fisher: np.ndarray, ridge: float = 1e-3) -> dict[str, float]:
    """kappa = (lambda_max + eps) / (lambda_min + eps), eps = ridge * mean eigenvalue."""
    eig = np.linalg.eigvalsh(np.asarray(fisher, dtype=np.float64))
    if ridge < 0:
        raise ValueError(f"ridge must be >= 0, got {ridge}")
    eps = ridge * float(eig.mean())
    if not eig[-1] > 0:
        raise ValueError("the Fisher matrix is zero: the loss does not depend on the magnitudes of this data")
    return {"kappa": float((eig[-1] + eps) / (eig[0] + eps)), "lambda_max": float(eig[-1]),
            "lambda_min": float(eig[0]), "eps": eps}


def _embed(encoder: TextEncoder, queries: Sequence[str], documents: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Raw query and document embeddings of the pairs, encoded once and shared by both predictors."""
    return (encoder.encode(queries, "query", show_progress=False),
            encoder.encode(documents, "document", show_progress=False))


def fisher_predictor(encoder: TextEncoder, queries: Sequence[str], documents: Sequence[str], *, batch_size: int = 32,
                     seed: int = 0, ridge: float = 1e-3,
                     embeddings: tuple[np.ndarray, np.ndarray] | None = None) -> dict[str, Any]:
    """kappa of the query and the document log-magnitude Fisher on the pretrained encoder, and a verdict.

    ``embeddings`` (raw query and document embeddings of the pairs) saves encoding them again.
    """
    batches = _batches(len(queries), batch_size, seed)
    if not batches:
        raise ValueError(f"the Fisher predictor needs at least 2 pairs, got {len(queries)}")
    if embeddings is None:
        embeddings = _embed(encoder, queries, documents)
    fisher = magnitude_fisher(torch.from_numpy(embeddings[0]), torch.from_numpy(embeddings[1]), batches)
    conds = {side: fisher_condition(f, ridge) for side, f in fisher.items()}
    kq, kd = conds["query"]["kappa"], conds["document"]["kappa"]
    return {
        "kappa_query": kq,
        "kappa_document": kd,
        "log10_kappa_ratio": math.log10(kd / kq),
        "fisher_query": fisher["query"].tolist(),
        "fisher_document": fisher["document"].tolist(),
        "eigen": conds,
        "ridge": ridge,
        "verdict": "dnorm" if kq < kd else "qnorm",
        "definition": ("per side, 2x2 empirical Fisher of q2d InfoNCE (dot head, scale 20, in-batch negatives) w.r.t. "
                       "(a, b) in log|x| -> a + (1+b) log|x| at 0, norms rescaled to geometric mean 1; "
                       "kappa = (lmax+eps)/(lmin+eps), eps = ridge*mean eigenvalue; "
                       "dnorm if kappa_query < kappa_document (our definition, not the paper's)"),
    }


def predict_norm(encoder: TextEncoder, queries: Sequence[str], documents: Sequence[str], *, seed: int = 0,
                 probe_steps: int = 4, probe_lr: float = 1e-4, probe_batch_size: int = 16, fisher_batch_size: int = 32,
                 ridge: float = 1e-3, dcv_threshold: float = DCV_THRESHOLD) -> dict[str, Any]:
    """Both predictors on n (query, positive document) pairs; a JSON-ready dict with timings."""
    if len(queries) != len(documents):
        raise ValueError(f"{len(queries)} queries but {len(documents)} documents")
    torch.manual_seed(seed)
    start = time.perf_counter()
    embeddings = _embed(encoder, queries, documents)
    encode_seconds = time.perf_counter() - start
    start = time.perf_counter()
    fisher = fisher_predictor(encoder, queries, documents, batch_size=fisher_batch_size, seed=seed, ridge=ridge,
                              embeddings=embeddings)
    fisher["seconds"] = time.perf_counter() - start
    start = time.perf_counter()
    logger.info("query-norm probe: %d steps under dnorm and under dot", probe_steps)
    dcv = query_cv_probe(encoder, queries, documents, steps=probe_steps, lr=probe_lr, batch_size=probe_batch_size,
                         seed=seed, threshold=dcv_threshold, pretrained_queries=embeddings[0])
    dcv["seconds"] = time.perf_counter() - start
    settings = {"n_pairs": len(queries), "seed": seed, "pooling": encoder.pooling,
                "query_max_length": encoder.query_max_length, "document_max_length": encoder.document_max_length,
                "probe_steps": probe_steps, "probe_lr": probe_lr, "probe_batch_size": probe_batch_size,
                "fisher_batch_size": fisher_batch_size, "ridge": ridge, "scale": SCALE,
                "encode_seconds": encode_seconds}
    return {"settings": settings, "query_cv_ratio": dcv, "fisher": fisher}

