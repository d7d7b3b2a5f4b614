"""Similarity heads: where (and how much) each side of a pair is normalised.

Every head scores a query ``q`` against a document ``d`` as

    s(q, d) = (q / |q|^gq) . (d / |d|^gd)

with per-side exponents ``gq, gd`` in [0, 1]. The four fixed heads are the corners of that square
(docs/method.md section 1): cosine (1, 1), dot (0, 0), qnorm (1, 0), dnorm (0, 1); ``learnable`` trains
``g = sigmoid(raw)`` for both sides, starting at 0.5.

Heads are applied at scoring time and never baked into stored embeddings, so raw norms stay
observable. ``transform_query`` / ``transform_document`` expose each side's transform so that an
inner-product index (faiss) over transformed vectors reproduces ``score`` exactly.

All arithmetic runs in at least float32 (float64 stays float64 for gradcheck), also under
autocast, and norms are floored so zero vectors give zero scores instead of NaN.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Union

import torch
from torch import nn

from clipmag.scoring.head_config import HEAD_NAMES, HeadConfig

# Far below any real embedding norm, yet large enough that the gradient at an exactly-zero vector
# (about 1 / NORM_FLOOR) stays finite when it flows back into fp16 activations.
NORM_FLOOR = 1e-3


def _compute_dtype(x: torch.Tensor) -> torch.dtype:
    return torch.promote_types(x.dtype, torch.float32)


def _log_norm(x: torch.Tensor) -> torch.Tensor:
    """log|x| per row with |x| floored at NORM_FLOOR (finite value and gradient at x = 0)."""
    squared = x.pow(2).sum(dim=-1, keepdim=True).clamp_min(NORM_FLOOR**2)
    return 0.5 * torch.log(squared)


def scale_by_norm_power(x: torch.Tensor, gamma: float | torch.Tensor) -> torch.Tensor:
    """Return ``x / |x|^gamma`` row-wise, computed in float32 or wider with autocast disabled."""
    with torch.autocast(device_type=x.device.type, enabled=False):
        x = x.to(_compute_dtype(x))
        if isinstance(gamma, (int, float)):
            if gamma == 0:
                return x
            if gamma == 1:
                return x * torch.exp(-_log_norm(x))
        gamma = torch.as_tensor(gamma, dtype=x.dtype, device=x.device)
        return x * torch.exp(-gamma * _log_norm(x))


class SimilarityHead(nn.Module):
    """Base class: a score built from a query-side and a document-side transform."""

    name: str = ""

    def query_gamma(self) -> float | torch.Tensor:
        raise NotImplementedError

    def document_gamma(self) -> float | torch.Tensor:
        raise NotImplementedError

    def transform_query(self, q: torch.Tensor) -> torch.Tensor:
        """The query side of the score: ``q / |q|^gq``."""
        return scale_by_norm_power(q, self.query_gamma())

    def transform_document(self, d: torch.Tensor) -> torch.Tensor:
        """The document side of the score: ``d / |d|^gd``."""
        return scale_by_norm_power(d, self.document_gamma())

    def score(self, q: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
        """Unscaled similarity matrix [Nq, Nd] of every query against every document."""
        with torch.autocast(device_type=q.device.type, enabled=False):
            tq, td = self.transform_query(q), self.transform_document(d)
            return tq @ td.to(tq.dtype).transpose(-2, -1)

    def paired(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """Row-wise scores [N]: ``a[i]`` as the query against ``b[i]`` as the document."""
        with torch.autocast(device_type=a.device.type, enabled=False):
            ta, tb = self.transform_query(a), self.transform_document(b)
            return (ta * tb.to(ta.dtype)).sum(dim=-1)

    def gammas(self) -> tuple[float, float]:
        gq, gd = self.query_gamma(), self.document_gamma()
        return float(torch.as_tensor(gq).detach()), float(torch.as_tensor(gd).detach())

    @property
    def symmetric(self) -> bool:
        """True when ``score(a, b) == score(b, a).T``, i.e. both sides are treated alike."""
        gq, gd = self.gammas()
        return gq == gd

    def to_dict(self) -> dict[str, Any]:
        """Settings that rebuild this head with ``build_head(**head.to_dict())``."""
        return {"name": self.name}

    def extra_repr(self) -> str:
        gq, gd = self.gammas()
        return f"gq={gq:.4f}, gd={gd:.4f}"


class _FixedHead(SimilarityHead):
    gq: float = 0.0
    gd: float = 0.0

    def query_gamma(self) -> float:
        return self.gq

    def document_gamma(self) -> float:
        return self.gd


class CosineHead(_FixedHead):
    """cos(theta): both sides normalised; magnitude ignored."""

    name, gq, gd = "cosine", 1.0, 1.0


class DotHead(_FixedHead):
    """|q||d|cos(theta): no normalisation; both magnitudes count."""

    name, gq, gd = "dot", 0.0, 0.0


class QNormHead(_FixedHead):
    """|d|cos(theta): the query is normalised, the document magnitude carries signal."""

    name, gq, gd = "qnorm", 1.0, 0.0


class DNormHead(_FixedHead):
    """|q|cos(theta): the document is normalised, the query norm acts as inverse temperature."""

    name, gq, gd = "dnorm", 0.0, 1.0


def _logit(p: float) -> float:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"learnable head: gamma must lie in [0, 1], got {p}")
    if p in (0.0, 1.0):
        return math.copysign(math.inf, p - 0.5)
    return math.log(p / (1.0 - p))


class LearnableHead(SimilarityHead):
    """Trainable exponents ``g = sigmoid(raw)`` for each side (two global scalars).

    ``raw_q`` and ``raw_d`` are meant for their own optimizer group (own learning rate, no weight
    decay): sharing the encoder's tiny learning rate leaves them stuck near their start
    (docs/method.md section 1). ``gq = gd = 1`` or ``0`` (raw = +-inf) reproduce the fixed heads.
    """

    name = "learnable"

    def __init__(self, gq: float = 0.5, gd: float = 0.5) -> None:
        super().__init__()
        self.raw_q = nn.Parameter(torch.tensor(_logit(float(gq))))
        self.raw_d = nn.Parameter(torch.tensor(_logit(float(gd))))

    def query_gamma(self) -> torch.Tensor:
        return torch.sigmoid(self.raw_q)

    def document_gamma(self) -> torch.Tensor:
        return torch.sigmoid(self.raw_d)

    def gamma_parameters(self) -> list[nn.Parameter]:
        return [self.raw_q, self.raw_d]

    def to_dict(self) -> dict[str, Any]:
        gq, gd = self.gammas()
        return {"name": self.name, "gq": gq, "gd": gd}


HEADS: dict[str, type[SimilarityHead]] = {
    cls.name: cls for cls in (CosineHead, DotHead, QNormHead, DNormHead, LearnableHead)
}
HeadSpec = Union[str, Mapping[str, Any], HeadConfig, Any]  # Any: a head record (its ``head`` dict)


def _build_named(name: str, settings: Mapping[str, Any]) -> SimilarityHead:
    if name not in HEADS:
        raise ValueError(f"unknown similarity head {name!r}; valid heads: {', '.join(HEAD_NAMES)}")
    cls = HEADS[name]
    if cls is not LearnableHead and settings:
        raise ValueError(f"head {name!r} takes no settings, got {sorted(settings)}")
    try:
        return cls(**settings)
    except TypeError as err:
        raise ValueError(f"head {name!r}: bad settings {dict(settings)}: {err}") from None


def build_head(spec: HeadSpec | None = None, **settings: Any) -> SimilarityHead:
    """The one way to a head, from any of its descriptions:

    * a name (``"dnorm"``), with the head's settings as keywords (only ``learnable`` takes any:
      its starting or learned ``gq`` / ``gd``), or all of it as keywords (``build_head(**to_dict())``);
    * a dict as ``SimilarityHead.to_dict`` writes it (``{"name": "learnable", "gq": 0.3, ...}``);
    * a head record (``clipmag.scoring.head_record.HeadRecord``: its ``head`` entry, learned gammas included);
    * a head config (``name``, ``gq``, ``gd``; the gammas apply to the learnable head only).

    Names come from ``HEAD_NAMES`` (:mod:`clipmag.scoring.head_config`), which ``HEADS`` implements and
    configs and command lines check against too.
    """
    if spec is None:  # build_head(**head.to_dict())
        if "name" not in settings:
            raise TypeError("build_head: name the head (or pass a dict, record or config)")
        spec = settings.pop("name")
    if isinstance(spec, str):
        return _build_named(spec, settings)
    if settings:
        raise TypeError("build_head: keyword settings go with a head name only")
    if isinstance(spec, Mapping):
        values = dict(spec)
        if "name" not in values:
            raise ValueError(f"head settings need a 'name' key, got {values}")
        return _build_named(values.pop("name"), values)
    record_head = getattr(spec, "head", None)
    if isinstance(record_head, Mapping):  # a head record
        return build_head(record_head)
    name = getattr(spec, "name", None)
    if isinstance(name, str):  # a head config
        return _build_named(name, {"gq": spec.gq, "gd": spec.gd} if name == "learnable" else {})
    raise TypeError(f"build_head: cannot build a head from {type(spec).__name__}")


def every_head(own: SimilarityHead) -> dict[str, SimilarityHead]:
    """Each registered head by name, ``own`` itself under its name: a learned learnable head keeps its gammas."""
    return {name: own if name == own.name else build_head(name) for name in HEAD_NAMES}


def gamma_parameters(module: nn.Module) -> list[nn.Parameter]:
    """All learnable-head exponent parameters inside ``module`` (for their own optimizer group)."""
    params: list[nn.Parameter] = []
    for sub in module.modules():
        if isinstance(sub, LearnableHead):
            params.extend(sub.gamma_parameters())
    return params
