"""The faiss side of a served index: one index file, flat, HNSW or IVF, under the layout's metric.

``ip`` is faiss's ``METRIC_INNER_PRODUCT`` and ``l2`` its ``METRIC_L2`` (squared distances);
``cosine`` is, as faiss's documentation prescribes, the inner product of L2-normalised vectors
(``faiss.normalize_L2`` on both sides). The index's own metric is checked against the manifest's
when it is opened, so a file built under another metric is refused instead of read.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from text_retrieval.retrieval.ann import new_faiss_index, widen_search

__all__ = ["FAISS_FILE", "FAISS_KINDS", "build_faiss", "FaissStore"]

FAISS_FILE = "index.faiss"
FAISS_KINDS = ("flat", "hnsw", "ivf")
_FAISS_METRIC = {"ip": faiss.METRIC_INNER_PRODUCT, "cosine": faiss.METRIC_INNER_PRODUCT, "l2": faiss.METRIC_L2}


def _prepared(rows: np.ndarray, metric: str) -> np.ndarray:
    rows = np.ascontiguousarray(rows, dtype=np.float32)
    if metric == "cosine":
        rows = rows.copy()
        faiss.normalize_L2(rows)
    return rows


def build_faiss(
    chunks: Iterator[np.ndarray], kind: str, dim: int, ntotal: int, metric: str, folder: Path
) -> dict[str, Any]:
    """Write ``folder/index.faiss`` of ``kind`` over the stored-vector ``chunks``; its description."""
    if kind not in FAISS_KINDS:
        raise ValueError(f"faiss index {kind!r} unknown; valid: {', '.join(FAISS_KINDS)}")
    index, parameters = new_faiss_index(kind, dim, ntotal, _FAISS_METRIC[metric])
    for rows in chunks:
        rows = _prepared(rows, metric)
        if not index.is_trained:  # IVF: the coarse clusters come from the first rows
            index.train(rows)
        index.add(rows)
    faiss.write_index(index, str(folder / FAISS_FILE))
    return {"file": FAISS_FILE, "kind": kind, "metric_type": int(index.metric_type), **parameters}


class FaissStore:
    """An opened ``index.faiss``: top-k metric values and positions of the documents, in faiss's convention."""

    def __init__(self, folder: Path, metric: str, ntotal: int) -> None:
        path = folder / FAISS_FILE
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no faiss index in this served index (build it with --stores faiss)")
        self.index = faiss.read_index(str(path))
        self.metric = metric
        expected = _FAISS_METRIC[metric]
        if self.index.metric_type != expected:
            found = {faiss.METRIC_INNER_PRODUCT: "inner product", faiss.METRIC_L2: "L2"}.get(
                self.index.metric_type, str(self.index.metric_type)
            )
            raise ValueError(
                f"{path}: its faiss metric is {found}, but the manifest says {metric}: the file was built under "
                "another metric than the head needs; rebuild the index with scripts/index.py build"
            )
        if self.index.ntotal != ntotal:
            raise ValueError(f"{path}: holds {self.index.ntotal} vectors, the manifest {ntotal}; rebuild the index")

    def search(self, sent: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(values, positions) of the top ``k``, best first; values as the metric gives them (L2: squared distance)."""
        k = min(k, self.index.ntotal)
        widen_search(self.index, k)
        return self.index.search(_prepared(sent, self.metric), k)
