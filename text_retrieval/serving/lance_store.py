"""The LanceDB side of a served index: an embedded table of (id, vector), searched exactly.

LanceDB runs in the process (no server) over files in the index folder, as users deploy it; with
no vector index built on the table, a search scans every row - exact k-nearest-neighbour search -
and ``bypass_vector_index`` keeps it so should someone add an ANN index to the table later. The
layout's metric maps to LanceDB's ``distance_type``: ``ip`` -> ``"dot"``, ``cosine`` -> ``"cosine"``,
``l2`` -> ``"l2"``. LanceDB reports distances: ``1 - q.d`` for dot, ``1 - cos`` for cosine and the
squared Euclidean distance for l2; ``search`` turns the first two back into faiss's similarities.
That convention is LanceDB's behaviour, not a documented contract, so ``check_distance_convention``
probes it once a process, on a two-row table in memory, before a table is built or searched: a
LanceDB that reports another value fails loudly instead of serving wrong scores.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from clipmag.errors import UserError

__all__ = ["LANCE_FOLDER", "LANCE_TABLE", "build_lance", "check_distance_convention", "probe_distances", "LanceStore"]

LANCE_FOLDER, LANCE_TABLE = "lancedb", "documents"
_DISTANCE_TYPE = {"ip": "dot", "cosine": "cosine", "l2": "l2"}
_QUERY_BATCH = 256  # queries per LanceDB search (one multi-vector query)
# faiss's value (inner product, cosine, squared distance) from LanceDB's _distance, per distance_type
_VALUE = {"dot": lambda d: 1.0 - d, "cosine": lambda d: 1.0 - d, "l2": lambda d: d}
_PROBE_DOCUMENTS, _PROBE_QUERY = np.array([[3.0, 4.0], [1.0, 0.0]], np.float32), np.array([1.0, 2.0], np.float32)


def _lancedb() -> Any:
    try:
        import lancedb
    except ImportError:
        raise UserError(
            "the LanceDB store needs lancedb: pip install 'clipmag[serve]' (or pip install lancedb)"
        ) from None
    return lancedb


def _expected(distance_type: str) -> np.ndarray:
    """faiss's values of the probe query against the probe documents under ``distance_type``."""
    dots = _PROBE_DOCUMENTS.astype(np.float64) @ _PROBE_QUERY
    if distance_type == "dot":
        return dots
    if distance_type == "cosine":
        return dots / (np.linalg.norm(_PROBE_DOCUMENTS, axis=1) * np.linalg.norm(_PROBE_QUERY))
    return ((_PROBE_DOCUMENTS - _PROBE_QUERY).astype(np.float64) ** 2).sum(axis=1)


def probe_distances(distance_type: str, searched_as: str | None = None) -> np.ndarray:
    """The probe query's faiss values as LanceDB reports them under ``searched_as`` (default
    ``distance_type``), read back through ``distance_type``'s convention, in the probe rows' order."""
    database = _lancedb().connect("memory://")
    table = database.create_table("probe", data=_batch(["a", "b"], _PROBE_DOCUMENTS), mode="overwrite")
    query = table.search(_PROBE_QUERY).distance_type(searched_as or distance_type).bypass_vector_index()
    found = query.limit(2).select(["id", "_distance"]).to_arrow().to_pydict()
    reported = dict(zip(found["id"], found["_distance"]))
    return np.array([_VALUE[distance_type](reported[i]) for i in ("a", "b")])


@functools.cache
def check_distance_convention(distance_type: str, searched_as: str | None = None) -> None:
    """Refuse a LanceDB whose ``_distance`` under ``distance_type`` is not the convention ``search``
    turns back into scores (``1 - q.d``, ``1 - cos``, squared distance); probed once a process.
    ``searched_as`` searches the probe under another distance type (what a changed LanceDB would report)."""
    read, expected = probe_distances(distance_type, searched_as), _expected(distance_type)
    if not np.allclose(read, expected, rtol=1e-5, atol=1e-5):
        version = getattr(_lancedb(), "__version__", "?")
        raise UserError(
            f"lancedb {version}: distance_type {distance_type!r} reports values that read back as {read.tolist()}, "
            f"not {expected.tolist()}: its _distance convention is not the one lancedb 0.40 has and the served "
            "scores would be wrong; pip install lancedb==0.40.0, or adapt text_retrieval/serving/lance_store.py"
        )


def _batch(ids: Sequence[str], rows: np.ndarray) -> Any:
    import pyarrow as pa

    rows = np.ascontiguousarray(rows, dtype=np.float32)
    vectors = pa.FixedSizeListArray.from_arrays(pa.array(rows.reshape(-1)), rows.shape[1])
    return pa.table({"id": pa.array(list(ids), pa.string()), "vector": vectors})


def build_lance(chunks: Iterator[np.ndarray], ids: Sequence[str], folder: Path, metric: str) -> dict[str, Any]:
    """Write the table ``documents`` under ``folder/lancedb`` from the stored-vector ``chunks`` (in ``ids`` order)."""
    check_distance_convention(_DISTANCE_TYPE[metric])
    database = _lancedb().connect(str(folder / LANCE_FOLDER))
    table, start = None, 0
    for rows in chunks:
        batch = _batch(ids[start : start + len(rows)], rows)
        start += len(rows)
        if table is None:
            table = database.create_table(LANCE_TABLE, data=batch, mode="overwrite")
        else:
            table.add(batch)
    return {"folder": LANCE_FOLDER, "table": LANCE_TABLE, "distance_type": _DISTANCE_TYPE[metric], "index": "none"}


class LanceStore:
    """An opened table: top-k values (faiss's convention) and positions of the documents, searched exactly."""

    def __init__(self, folder: Path, metric: str, ids: Sequence[str]) -> None:
        path = folder / LANCE_FOLDER
        if not path.is_dir():
            raise FileNotFoundError(f"{path}: no LanceDB table in this served index (build it with --stores lancedb)")
        self.metric, self.distance_type = metric, _DISTANCE_TYPE[metric]
        check_distance_convention(self.distance_type)
        self.table = _lancedb().connect(str(path)).open_table(LANCE_TABLE)
        self.position = {doc_id: i for i, doc_id in enumerate(ids)}
        if self.table.count_rows() != len(ids):
            raise ValueError(
                f"{path}: holds {self.table.count_rows()} rows, the manifest {len(ids)}; rebuild the index"
            )

    def search(self, sent: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(values, positions) of the top ``k`` of every query, best first (-1 pads a short list)."""
        k = min(k, len(self.position))
        values = np.full((len(sent), k), -np.inf if self.metric != "l2" else np.inf, dtype=np.float64)
        positions = np.full((len(sent), k), -1, dtype=np.int64)
        for first in range(0, len(sent), _QUERY_BATCH):
            block = np.ascontiguousarray(sent[first : first + _QUERY_BATCH], dtype=np.float32)
            query = self.table.search(block if len(block) > 1 else block[0]).distance_type(self.distance_type)
            found = query.bypass_vector_index().limit(k).select(["id", "_distance"]).to_arrow().to_pydict()
            rows = found.get("query_index", [0] * len(found["id"]))
            slot = dict.fromkeys(range(len(block)), 0)
            for row, doc_id, distance in zip(rows, found["id"], found["_distance"]):
                value = distance if self.metric == "l2" else 1.0 - distance
                values[first + row, slot[row]], positions[first + row, slot[row]] = value, self.position[doc_id]
                slot[row] += 1
        return values, positions
