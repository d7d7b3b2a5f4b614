"""The contrastive losses over any similarity head, one implementation each for the text and the
image-text trainers: InfoNCE (a softmax over candidates) and SigLIP's pairwise sigmoid loss.

Layout. ``query`` is [N, D]. ``documents`` is [N, D] (one positive per query) or [N, 1 + k, D]:
k hard negatives per query with the positive first in each group. Under torch.distributed the
documents (and, for ``d2q``, the queries) of every rank are gathered with gradient and each rank
scores its *local* rows against the *global* candidates (open_clip's local loss with
gather-with-grad). Candidate columns are ``[all positives of all ranks, then all hard negatives of
all ranks]``; the target of global row i is column i, whatever the number of ranks, so the loss
and every gradient equal one process on the concatenated batch.

Directions. The head always scores ``s(query, document)``; the direction only chooses the softmax
axis: ``q2d`` ranks documents for each query, ``d2q`` ranks queries for each positive document,
``both`` averages the two (the symmetric CLIP loss). Hard negatives only enter ``q2d``.

SigLIP (Zhai et al. 2023) has no softmax and so no direction: every (query, candidate) pair is a
binary decision, ``-log sigmoid(+-(scale * s(q, d) + bias))``, summed over the candidates of each
local row and divided by the local rows, as open_clip's ``SigLipLoss``. Distributed, it takes the
same gathered candidates (open_clip's all-gather variant of its neighbour exchange: each rank's
rows meet every rank's candidates once), so the mean over ranks equals one process on the global
batch. The head still decides the roles: which side is the query matters for qnorm / dnorm.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from clipmag.runtime import distributed as dist_utils
from clipmag.scoring.heads import SimilarityHead
from clipmag.scoring.loss_config import DIRECTIONS, SIGLIP_BIAS, SIGLIP_SCALE, Direction, LossConfig


class _ScaledContrastiveLoss(nn.Module):
    """What both losses share: the (learnable, clamped) scale and the gathering of candidates."""

    kind: str = ""
    direction: str | None = None

    def __init__(self, scale: float, learnable_scale: bool, max_scale: float, gather: bool) -> None:
        super().__init__()
        if scale <= 0 or max_scale <= 0:
            raise ValueError(f"scale and max_scale must be positive, got {scale}, {max_scale}")
        self.gather = gather
        self.max_log_scale = math.log(max_scale)
        if learnable_scale:
            self.log_scale = nn.Parameter(torch.tensor(min(math.log(scale), self.max_log_scale)))
        else:
            self.register_buffer("log_scale", torch.tensor(math.log(scale)))

    def current_scale(self) -> torch.Tensor:
        return self.log_scale.exp()

    @torch.no_grad()
    def clamp_scale_(self) -> None:
        """Clamp a learnable scale to [1, max_scale] after an optimizer step (open_clip's rule).

        Clamping inside the forward instead would zero its gradient at the cap and pin it there.
        """
        if isinstance(self.log_scale, nn.Parameter):
            self.log_scale.clamp_(0.0, self.max_log_scale)

    def _gathering(self) -> bool:
        # Only in training mode: validation runs on one rank and must not wait for the others.
        return self.gather and self.training

    def _gather(self, x: torch.Tensor) -> torch.Tensor:
        return dist_utils.all_gather_with_grad(x) if self._gathering() else x

    def _targets(self, query: torch.Tensor) -> torch.Tensor:
        """The global column of each local row's positive."""
        offset = dist_utils.get_rank() if self._gathering() else 0
        return torch.arange(query.shape[0], device=query.device) + offset * query.shape[0]

    def _candidates(self, documents: torch.Tensor) -> torch.Tensor:
        """Every rank's positives, then every rank's hard negatives (the q2d columns)."""
        candidates = [self._gather(documents[:, 0])]
        if documents.shape[1] > 1:
            candidates.append(self._gather(documents[:, 1:].reshape(-1, documents.shape[-1])))
        return torch.cat(candidates)


def _checked_layout(query: torch.Tensor, documents: torch.Tensor, name: str) -> torch.Tensor:
    """``documents`` as [N, 1 + k, D], or a ValueError naming the shapes."""
    if documents.dim() == 2:
        documents = documents.unsqueeze(1)
    if query.dim() != 2 or documents.dim() != 3 or documents.shape[0] != query.shape[0]:
        raise ValueError(
            f"{name} expects query [N, D] and documents [N, D] or [N, 1 + k, D]; "
            f"got {tuple(query.shape)} and {tuple(documents.shape)}"
        )
    return documents


class InfoNCE(_ScaledContrastiveLoss):
    """Contrastive cross-entropy with logits ``scale * head.score(q, d)``.

    The head is not the loss's: the model owns it (it is part of what is exported and scored) and
    passes it to every call, so one head object has one owner and the loss cannot score with another.

    Args:
        scale: inverse temperature alpha (20 = tau 0.05, the paper's setting for every head).
        direction: ``q2d``, ``d2q`` or ``both``.
        learnable_scale: train ``log(scale)`` as open_clip does with ``logit_scale``.
        max_scale: clamp of the learnable scale (open_clip: 100).
        label_smoothing: passed to cross-entropy.
        gather: gather candidates across ranks when torch.distributed is initialised and the
            module is in training mode (``.eval()`` scores local rows only).

    ``forward(query, documents, head)``: ``head`` is the model's similarity head (its gammas, if
    any, train through this loss). Returns a dict: ``loss`` (to backpropagate), ``loss_q2d`` / ``loss_d2q``
    (the terms used), ``scale``, ``accuracy`` (top-1 of the first direction used),
    ``logits_pos_mean``, ``logits_neg_mean``, ``logits_std`` (all statistics detached).
    """

    kind = "infonce"

    def __init__(
        self,
        scale: float = 20.0,
        direction: Direction = "q2d",
        learnable_scale: bool = False,
        max_scale: float = 100.0,
        label_smoothing: float = 0.0,
        gather: bool = True,
    ) -> None:
        if direction not in DIRECTIONS:
            raise ValueError(f"unknown loss direction {direction!r}; valid: {', '.join(DIRECTIONS)}")
        super().__init__(scale, learnable_scale, max_scale, gather)
        self.direction = direction
        self.label_smoothing = label_smoothing

    def forward(self, query: torch.Tensor, documents: torch.Tensor, head: SimilarityHead) -> dict[str, torch.Tensor]:
        documents = _checked_layout(query, documents, "InfoNCE")
        targets = self._targets(query)
        scale = self.current_scale()
        out: dict[str, torch.Tensor] = {}
        first_logits: torch.Tensor | None = None
        if self.direction in ("q2d", "both"):
            logits = scale * head.score(query, self._candidates(documents))
            out["loss_q2d"] = F.cross_entropy(logits, targets, label_smoothing=self.label_smoothing)
            first_logits = logits
        if self.direction in ("d2q", "both"):
            logits = scale * head.score(self._gather(query), documents[:, 0]).t()
            out["loss_d2q"] = F.cross_entropy(logits, targets, label_smoothing=self.label_smoothing)
            first_logits = logits if first_logits is None else first_logits
        terms = [v for k, v in out.items() if k.startswith("loss_")]
        out["loss"] = torch.stack(terms).mean()
        out.update(_logit_statistics(first_logits.detach(), targets, scale.detach()))
        return out


class SigLIP(_ScaledContrastiveLoss):
    """SigLIP's pairwise sigmoid loss with logits ``scale * head.score(q, d) + bias``.

    Each local row is scored against every candidate (the positive labelled +1, the rest -1,
    hard negatives included) and the loss is the sum of ``-log sigmoid(label * logit)`` divided by
    the local rows: open_clip's ``SigLipLoss`` when the head is cosine. ``scale`` and ``bias`` start
    where open_clip starts them (10 and -10) and train when ``learnable`` (the scale clamped to
    ``max_scale`` after each step). Returns ``loss``, ``scale``, ``bias``, ``accuracy`` (top-1 over
    each row's candidates) and the logit statistics, as ``InfoNCE``.
    """

    kind = "siglip"

    def __init__(
        self,
        scale: float = SIGLIP_SCALE,
        bias: float = SIGLIP_BIAS,
        learnable: bool = True,
        max_scale: float = 100.0,
        gather: bool = True,
    ) -> None:
        super().__init__(scale, learnable, max_scale, gather)
        if learnable:
            self.bias = nn.Parameter(torch.tensor(float(bias)))
        else:
            self.register_buffer("bias", torch.tensor(float(bias)))

    def forward(self, query: torch.Tensor, documents: torch.Tensor, head: SimilarityHead) -> dict[str, torch.Tensor]:
        documents = _checked_layout(query, documents, "SigLIP")
        targets = self._targets(query)
        scale = self.current_scale()
        logits = scale * head.score(query, self._candidates(documents)) + self.bias.reshape(())
        labels = torch.full_like(logits, -1.0)
        labels[torch.arange(len(targets), device=logits.device), targets] = 1.0
        out = {"loss": -F.logsigmoid(labels * logits).sum() / query.shape[0]}
        out.update(_logit_statistics(logits.detach(), targets, scale.detach()))
        out["bias"] = self.bias.detach().reshape(())
        return out


ContrastiveLoss = InfoNCE | SigLIP


def _logit_statistics(logits: torch.Tensor, targets: torch.Tensor, scale: torch.Tensor) -> dict[str, torch.Tensor]:
    rows = torch.arange(logits.shape[0], device=logits.device)
    positive = logits[rows, targets]
    mask = torch.ones_like(logits, dtype=torch.bool)
    mask[rows, targets] = False
    negative = logits[mask]
    return {
        "scale": scale,
        "accuracy": (logits.argmax(dim=1) == targets).float().mean(),
        "logits_pos_mean": positive.mean(),
        "logits_neg_mean": negative.mean() if negative.numel() else positive.new_zeros(()),
        "logits_std": logits.std() if logits.numel() > 1 else logits.new_zeros(()),
    }


def loss_from_config(cfg: LossConfig) -> ContrastiveLoss:
    """The configured loss; the front end has resolved the section first (:func:`resolve_loss`, and
    ``direction=auto`` for InfoNCE)."""
    if cfg.scale is None or (cfg.kind == "siglip" and cfg.bias is None):
        raise ValueError("the loss section must be resolved (resolve_loss) by the front end before the loss is built")
    if cfg.kind == "siglip":
        return SigLIP(cfg.scale, cfg.bias, cfg.learnable_scale, cfg.max_scale)
    if cfg.direction == "auto":
        raise ValueError("loss.direction=auto must be resolved by the front end before the loss is built")
    return InfoNCE(
        scale=cfg.scale,
        direction=cfg.direction,
        learnable_scale=cfg.learnable_scale,
        max_scale=cfg.max_scale,
        label_smoothing=cfg.label_smoothing,
    )
