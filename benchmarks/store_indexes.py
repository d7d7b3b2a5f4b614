"""One vector index per store, built over given vectors and searched at a search-time setting, for the
serving benchmarks (``bench_ann_trained.py``: recall; ``bench_serving.py``: speed).

A store holds the vectors it is given (a head's stored form, ``text_retrieval/serving/layout.py``)
under a metric: ``ip`` (the inner product: faiss ``METRIC_INNER_PRODUCT``, LanceDB ``"dot"``, Qdrant
``Dot``), ``cosine`` (faiss ``normalize_L2`` then inner product, LanceDB ``"cosine"``, Qdrant
``Cosine``) or ``l2`` (the MIPS-to-L2 layout's metric). The index kinds:

* faiss ``flat`` (exact), ``hnsw`` and ``ivf`` at ``text_retrieval/retrieval/ann.py``'s settings
  (HNSW M = 32; IVF-Flat with ``4 sqrt(N)`` lists), searched at an ``efSearch`` or ``nprobe``;
* LanceDB (an embedded table under a temporary folder) ``exact`` (no index: ``bypass_vector_index``),
  or an index built by the current API, ``table.create_index("vector", config=...)``, at lancedb's
  own defaults: ``IVF_PQ`` (``IvfPq``, what ``create_index`` builds when no type is named:
  product-quantised, ``dim / 16`` sub-vectors of 8 bits), ``IVF_FLAT`` (``IvfFlat``, float vectors),
  ``IVF_HNSW_SQ`` (``HnswSq``, 8-bit scalar-quantised) and ``HNSW`` (``HnswFlat`` with one partition:
  one graph over float vectors), searched at ``nprobes`` (IVF) or ``ef`` (HNSW), ``None`` meaning
  lancedb's default;
* Qdrant's local mode (``QdrantClient(location=":memory:")``) ``exact``: local mode keeps no HNSW
  graph (``qdrant_client/local``: a numpy scan of every point), whatever ``hnsw_config`` says, so it
  is exact by construction; the Qdrant server's HNSW is not measured here.

``search`` returns the positions (row numbers of the vectors given) of each query's top ``k``.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

import faiss
import numpy as np

from text_retrieval.retrieval.ann import HNSW_EF_SEARCH, new_faiss_index

__all__ = ["INDEX_KINDS", "StoreIndex", "build_index"]

INDEX_KINDS = {
    "faiss": ("flat", "hnsw", "ivf"),
    "lancedb": ("exact", "IVF_PQ", "IVF_FLAT", "IVF_HNSW_SQ", "HNSW"),
    "qdrant-local": ("exact",),
}
_FAISS_METRIC = {"ip": faiss.METRIC_INNER_PRODUCT, "cosine": faiss.METRIC_INNER_PRODUCT, "l2": faiss.METRIC_L2}
_LANCE_DISTANCE = {"ip": "dot", "cosine": "cosine", "l2": "l2"}
_QDRANT_DISTANCE = {"ip": "Dot", "cosine": "Cosine", "l2": "Euclid"}
_BATCH = 4096  # rows a store takes per write
_QUERY_BATCH = 256  # queries a store answers per call


@dataclass
class StoreIndex:
    """A built index: what it is, how long building took, and its search-time knob (``None``: none).

    ``default`` is the knob's value when none is set: clipmag's (faiss: ``ann.py``'s efSearch and
    nprobe) or the store's own (LanceDB: ``None``, left to lancedb)."""

    store: str
    kind: str
    metric: str
    build_s: float
    knob: str | None
    default: Any
    described: dict[str, Any] = field(default_factory=dict)
    handle: Any = None

    def search(self, queries: np.ndarray, k: int, value: Any = None) -> np.ndarray:
        """Positions [len(queries), k] of each query's top ``k`` at ``value`` of the knob (-1 pads)."""
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        if self.store == "faiss":
            return _faiss_search(self, queries, k, value)
        if self.store == "lancedb":
            return _lance_search(self, queries, k, value)
        return _qdrant_search(self, queries, k)


def build_index(store: str, kind: str, metric: str, docs: np.ndarray) -> StoreIndex:
    """``kind`` of ``store`` over ``docs`` under ``metric``, timed from the first row written to the
    index ready to search (LanceDB: the table's rows plus the index; Qdrant: the upload)."""
    if kind not in INDEX_KINDS.get(store, ()):
        known = "; ".join(f"{s}: {', '.join(k)}" for s, k in INDEX_KINDS.items())
        raise ValueError(f"no {store} index {kind!r}; known: {known}")
    if metric not in _FAISS_METRIC:
        raise ValueError(f"metric {metric!r} unknown; valid: {', '.join(_FAISS_METRIC)}")
    docs = np.ascontiguousarray(docs, dtype=np.float32)
    build = {"faiss": _build_faiss, "lancedb": _build_lance, "qdrant-local": _build_qdrant}[store]
    return build(kind, metric, docs)


def _unit_if_cosine(rows: np.ndarray, metric: str) -> np.ndarray:
    if metric != "cosine":
        return rows
    rows = rows.copy()
    faiss.normalize_L2(rows)
    return rows


def _build_faiss(kind: str, metric: str, docs: np.ndarray) -> StoreIndex:
    start = time.perf_counter()
    index, parameters = new_faiss_index(kind, docs.shape[1], len(docs), _FAISS_METRIC[metric])
    rows = _unit_if_cosine(docs, metric)
    if not index.is_trained:
        index.train(rows)
    index.add(rows)
    seconds = time.perf_counter() - start
    knob, default = {"hnsw": ("efSearch", HNSW_EF_SEARCH), "ivf": ("nprobe", parameters.get("nprobe"))}.get(
        kind, (None, None)
    )
    described = {k: v for k, v in parameters.items() if k in ("M", "efConstruction", "nlist")}
    return StoreIndex("faiss", kind, metric, seconds, knob, default, described, index)


def _faiss_search(built: StoreIndex, queries: np.ndarray, k: int, value: Any) -> np.ndarray:
    index = built.handle
    if built.kind == "hnsw":
        index.hnsw.efSearch = max(int(value or built.default), k)  # faiss returns at most efSearch hits
    elif built.kind == "ivf":
        index.nprobe = min(int(value or built.default), index.nlist)
    return index.search(_unit_if_cosine(queries, built.metric), k)[1]


def _lance_config(kind: str, distance: str) -> Any:
    from lancedb.index import HnswFlat, HnswSq, IvfFlat, IvfPq

    if kind == "IVF_PQ":
        return IvfPq(distance_type=distance)
    if kind == "IVF_FLAT":
        return IvfFlat(distance_type=distance)
    if kind == "IVF_HNSW_SQ":
        return HnswSq(distance_type=distance)
    return HnswFlat(distance_type=distance, num_partitions=1)  # "HNSW": one graph, float vectors


def _build_lance(kind: str, metric: str, docs: np.ndarray) -> StoreIndex:
    import lancedb
    import pyarrow as pa

    folder = tempfile.TemporaryDirectory(prefix="clipmag-lance-")
    start = time.perf_counter()
    table = None
    for first in range(0, len(docs), _BATCH):
        rows = docs[first : first + _BATCH]
        vectors = pa.FixedSizeListArray.from_arrays(pa.array(rows.reshape(-1)), docs.shape[1])
        batch = pa.table({"position": pa.array(np.arange(first, first + len(rows)), pa.int64()), "vector": vectors})
        if table is None:
            table = lancedb.connect(folder.name).create_table("documents", data=batch)
        else:
            table.add(batch)
    if kind != "exact":
        table.create_index("vector", config=_lance_config(kind, _LANCE_DISTANCE[metric]))
    seconds = time.perf_counter() - start
    knob = None if kind == "exact" else ("ef" if "HNSW" in kind else "nprobes")
    described = {"lancedb": lancedb.__version__, "distance_type": _LANCE_DISTANCE[metric]}
    if kind != "exact":
        stats = table.index_stats(table.list_indices()[0].name)
        described.update(index_type=stats.index_type, indexed_rows=stats.num_indexed_rows)
    return StoreIndex("lancedb", kind, metric, seconds, knob, None, described, (table, folder))


def _lance_search(built: StoreIndex, queries: np.ndarray, k: int, value: Any) -> np.ndarray:
    table, _ = built.handle
    positions = np.full((len(queries), k), -1, dtype=np.int64)
    for first in range(0, len(queries), _QUERY_BATCH):
        block = queries[first : first + _QUERY_BATCH]
        query = table.search(block if len(block) > 1 else block[0]).distance_type(_LANCE_DISTANCE[built.metric])
        if built.kind == "exact":
            query = query.bypass_vector_index()
        elif value is not None:
            query = query.ef(int(value)) if built.knob == "ef" else query.nprobes(int(value))
        # _distance named: lance includes it today and warns on every search that leaves it out
        found = query.limit(k).select(["position", "_distance"]).to_arrow().to_pydict()
        rows = found.get("query_index", [0] * len(found["position"]))
        filled = dict.fromkeys(range(len(block)), 0)
        for row, position in zip(rows, found["position"]):
            positions[first + row, filled[row]] = position
            filled[row] += 1
    return positions


def _build_qdrant(kind: str, metric: str, docs: np.ndarray) -> StoreIndex:
    from qdrant_client import QdrantClient, models

    start = time.perf_counter()
    client = QdrantClient(location=":memory:")
    params = models.VectorParams(size=docs.shape[1], distance=models.Distance(_QDRANT_DISTANCE[metric]))
    client.create_collection("documents", vectors_config=params)
    for first in range(0, len(docs), _BATCH):
        rows = docs[first : first + _BATCH]
        ids = list(range(first, first + len(rows)))
        client.upsert("documents", points=models.Batch(ids=ids, vectors=rows.tolist()), wait=True)
    seconds = time.perf_counter() - start
    described = {"distance": _QDRANT_DISTANCE[metric], "mode": "local, in memory"}
    return StoreIndex("qdrant-local", kind, metric, seconds, None, None, described, client)


def _qdrant_search(built: StoreIndex, queries: np.ndarray, k: int) -> np.ndarray:
    from qdrant_client import models

    positions = np.full((len(queries), k), -1, dtype=np.int64)
    for first in range(0, len(queries), _QUERY_BATCH):
        block = queries[first : first + _QUERY_BATCH]
        requests = [models.QueryRequest(query=row.tolist(), limit=k) for row in block]
        for row, answer in enumerate(built.handle.query_batch_points("documents", requests=requests)):
            positions[first + row, : len(answer.points)] = [int(p.id) for p in answer.points]
    return positions
