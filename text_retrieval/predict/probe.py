"""The query-norm CV ratio (the paper's v1 predictor of qnorm vs dnorm), measured after a short probe.

**Exploratory.** docs/method.md section 3 defines ``dCV = CV(query norms under dnorm) / CV(query
norms under dot)`` after fine-tuning (Contriever 0.5-2x preferred qnorm, RetroMAE 4-9x preferred
dnorm). The norms of an untuned model do not depend on the head, so we measure the ratio after a
short *probe*: two copies of the encoder each take ``probe_steps`` AdamW steps (lr ``probe_lr``,
betas 0.9/0.98, weight decay 0.01, gradient clipping 1.0, the paper's optimiser) of q2d InfoNCE
(scale 20, in-batch negatives, batches of ``probe_batch_size`` seeded pairs) under ``dnorm`` and
under ``dot``, with dropout off so the probe is deterministic and the token-embedding table frozen
(its dense gradient would cost more than the rest of a CPU step; the norms come from the layers
above). CV = std/mean of the raw query norms of all n probe queries, re-encoded after the probe.
Verdict: ``dnorm`` when dCV exceeds ``dcv_threshold`` (default sqrt(2 * 4) = 2.83, the geometric
midpoint of the paper's two bands), else ``qnorm``. A probe of a few steps moves norms far less
than 30k steps of fine-tuning, so its ratio stays near 1 unless the dnorm gradient spreads query
norms quickly; the threshold is the paper's and has not been calibrated for a probe. The output
says so. :mod:`text_retrieval.predict.predictors` runs it next to the scale-free Fisher predictor.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from clipmag.scoring.diagnostics import norm_stats, row_norms
from clipmag.scoring.heads import build_head
from clipmag.scoring.losses import InfoNCE
from text_retrieval.model.encoder import TextEncoder
from text_retrieval.predict.config import DCV_THRESHOLD

__all__ = ["query_cv_probe", "seeded_batches", "SCALE"]

SCALE = 20.0


def seeded_batches(n: int, batch_size: int, seed: int) -> list[list[int]]:
    """A seeded partition of range(n) into batches; a last batch of one pair is dropped (no negatives)."""
    order = list(range(n))
    random.Random(seed).shuffle(order)
    out = [order[i : i + batch_size] for i in range(0, n, batch_size)]
    return [b for b in out if len(b) >= 2]


def _probe_cv(
    encoder: TextEncoder,
    head: str,
    tokens: list[tuple[Any, Any]],
    queries: Sequence[str],
    steps: int,
    lr: float,
    seed: int,
) -> dict[str, float]:
    """Train a copy of the encoder for ``steps`` under ``head``; norm stats of the queries afterwards."""
    torch.manual_seed(seed)
    model = copy.deepcopy(encoder.model)
    model.get_input_embeddings().weight.requires_grad_(False)  # its dense gradient dominates a CPU step
    probe = TextEncoder(
        model,
        encoder.tokenizer,
        head=build_head(head),
        pooling=encoder.pooling,
        query_prefix=encoder.query_prefix,
        document_prefix=encoder.document_prefix,
        query_max_length=encoder.query_max_length,
        document_max_length=encoder.document_max_length,
    )
    loss_fn = InfoNCE(scale=SCALE, direction="q2d", gather=False)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.98), eps=1e-8, weight_decay=0.01, foreach=True)
    model.eval()  # dropout off: the probe must be deterministic
    losses = []
    for step in range(steps):
        q_batch, d_batch = tokens[step % len(tokens)]
        out = loss_fn(probe.embed(q_batch), probe.embed(d_batch), probe.head)
        optimizer.zero_grad(set_to_none=True)
        out["loss"].backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        losses.append(float(out["loss"].detach()))
    stats = norm_stats(row_norms(probe.encode(queries, "query", show_progress=False)))
    return {**stats, "losses": losses}


def query_cv_probe(
    encoder: TextEncoder,
    queries: Sequence[str],
    documents: Sequence[str],
    *,
    steps: int = 4,
    lr: float = 1e-4,
    batch_size: int = 16,
    seed: int = 0,
    threshold: float = DCV_THRESHOLD,
    pretrained_queries: np.ndarray | None = None,
) -> dict[str, Any]:
    """dCV = CV(query norms after a dnorm probe) / CV(after a dot probe); see the module docstring.

    ``pretrained_queries`` (raw query embeddings of the untouched encoder) saves encoding them again.
    """
    batches = seeded_batches(len(queries), batch_size, seed)
    if not batches or steps < 1:
        raise ValueError(f"the probe needs steps >= 1 and at least 2 pairs, got steps={steps}, n={len(queries)}")
    tokens = [
        (encoder.tokenize([queries[i] for i in b], "query"), encoder.tokenize([documents[i] for i in b], "document"))
        for b in batches
    ]
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
        "definition": (
            f"CV of the n query norms after {steps} AdamW steps (lr {lr}, batch {batch_size}) "
            "of q2d InfoNCE under dnorm, divided by the same after the same steps under dot; "
            f"verdict dnorm if > {threshold:.3g} (paper's band midpoint, not calibrated for a short probe)"
        ),
    }
