"""What a store holds for a head, which metric it may search with, and how its values become scores.

Every head scores ``s(q, d) = (q / |q|^gq) . (d / |d|^gd)`` (``clipmag/scoring/heads.py``), the
learnable head included (its learned gammas are two numbers), so each side's transform is applied
before the vectors reach the store: documents are stored as ``d / |d|^gd`` (raw for dot and qnorm,
unit length for cosine and dnorm), queries are sent as ``q / |q|^gq``, and the inner product of the
two is the head's score. The store's metric:

* ``ip`` (inner product) reproduces every head's ranking and scores;
* ``cosine`` and ``l2`` reproduce them only where every stored document has one norm: the heads
  with ``gd = 1`` (cosine, dnorm, a learnable head that learned it), or any head after the MIPS
  reduction (``mips``: one extra coordinate brings every document to the largest norm ``M``,
  ``text_retrieval/retrieval/mips.py``). Elsewhere cosine throws away the document norm that dot,
  qnorm and learnable rank by, and l2 ranks by ``|d|^2 - 2 q.d``, which penalises the very norms
  they reward; such a layout is refused in one line.

Stores report their metric's value the way faiss does (inner product, cosine, squared distance),
and ``scores`` turns it back into the inner product: with ``R`` the documents' common norm,
``q.d = cos * |q| * R`` and ``q.d = (|q|^2 + R^2 - dist) / 2``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from clipmag.scoring.heads import SimilarityHead
from text_retrieval.retrieval.index import head_transform
from text_retrieval.retrieval.mips import augment_documents, augment_queries

__all__ = ["METRICS", "Layout", "check_metric", "unit_documents"]

METRICS = ("ip", "cosine", "l2")


def unit_documents(head: SimilarityHead) -> bool:
    """Whether the head's document side leaves every document at unit length (``gd = 1``)."""
    return head.gammas()[1] == 1.0


def check_metric(head: SimilarityHead, metric: str, mips: bool) -> None:
    """Refuse, in one line, a metric under which a store would not rank as ``head`` does."""
    if metric not in METRICS:
        raise ValueError(f"metric {metric!r} unknown; valid: {', '.join(METRICS)}")
    if metric == "ip" or mips or unit_documents(head):
        return
    loses = "discards the document norm" if metric == "cosine" else "ranks by |d|^2 - 2 q.d, penalising the norms"
    raise ValueError(
        f"metric {metric} {loses} that the {head.name} head ranks by (gd = {head.gammas()[1]:.3g}): "
        "use --metric ip, or add --mips to bring every document to one norm first"
    )


@dataclass
class Layout:
    """The head, the store's metric, and the common document norm the MIPS reduction set (``None``: off)."""

    head: SimilarityHead
    metric: str = "ip"
    mips_norm: float | None = None

    def __post_init__(self) -> None:
        check_metric(self.head, self.metric, self.mips_norm is not None)

    @property
    def common_norm(self) -> float:
        """``R``: every stored document's norm where the metric needs one (1 for unit documents)."""
        return 1.0 if self.mips_norm is None else float(self.mips_norm)

    def documents(self, raw_chunks: Iterator[np.ndarray]) -> Iterator[np.ndarray]:
        """The stored vectors of raw document chunks: the head's document side, then the MIPS coordinate."""
        for rows in raw_chunks:
            transformed = head_transform(self.head, rows, "document")
            yield transformed if self.mips_norm is None else augment_documents(transformed, self.mips_norm)

    def queries(self, raw: np.ndarray) -> np.ndarray:
        """The vectors sent to the store: the head's query side (and a zero for the MIPS coordinate)."""
        transformed = head_transform(self.head, raw, "query")
        return transformed if self.mips_norm is None else augment_queries(transformed)

    def scores(self, values: np.ndarray, sent: np.ndarray) -> np.ndarray:
        """Inner products (float64) from a store's metric values for the queries ``sent``."""
        values = np.asarray(values, dtype=np.float64)
        if self.metric == "ip":
            return values
        norm = np.linalg.norm(sent.astype(np.float64), axis=1, keepdims=True)
        if self.metric == "cosine":
            return values * norm * self.common_norm
        return (norm**2 + self.common_norm**2 - values) / 2
