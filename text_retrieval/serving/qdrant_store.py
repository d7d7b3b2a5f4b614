"""The Qdrant side of a served index: a collection in Qdrant's local mode, embedded in the process.

``qdrant-client``'s local mode (``QdrantClient(path=...)``) keeps the collection in files under the
index folder and searches it exhaustively with numpy (``qdrant_client/local/distances.py``), so a
search is exact and needs no server. The layout's metric maps to Qdrant's ``Distance``: ``ip`` ->
``Dot``, ``cosine`` -> ``Cosine``, ``l2`` -> ``Euclid``. Local mode, like the server, normalises the
vectors of a Cosine collection on upload and divides by the norms again when scoring
(qdrant-client 1.20.0: ``local_collection.py``, ``distances.cosine_similarity``). Qdrant reports
the inner product for Dot, the cosine for Cosine and the (not squared) Euclidean distance for
Euclid; ``search`` squares the last, so the values are faiss's. A point's id is the document's
position in ``ids.json``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from clipmag.errors import UserError

__all__ = ["QDRANT_FOLDER", "QDRANT_COLLECTION", "build_qdrant", "QdrantStore"]

QDRANT_FOLDER, QDRANT_COLLECTION = "qdrant", "documents"
_DISTANCE = {"ip": "Dot", "cosine": "Cosine", "l2": "Euclid"}
_QUERY_BATCH = 256  # queries per request batch


def _qdrant() -> Any:
    try:
        import qdrant_client
    except ImportError:
        raise UserError(
            "the Qdrant store needs qdrant-client: pip install 'clipmag[serve]' (or pip install qdrant-client)"
        ) from None
    return qdrant_client


@contextmanager
def _client(path: Path) -> Iterator[Any]:
    """A local-mode client of ``path``, closed on leaving: local mode locks its folder to one client at a time."""
    qdrant = _qdrant()
    try:
        client = qdrant.QdrantClient(path=str(path))
    except RuntimeError as err:
        raise UserError(f"{path}: {err}") from None
    try:
        yield client
    finally:
        client.close()


def build_qdrant(chunks: Iterator[np.ndarray], folder: Path, dim: int, metric: str) -> dict[str, Any]:
    """Write the collection ``documents`` under ``folder/qdrant`` from the stored-vector ``chunks``."""
    models = _qdrant().models
    with _client(folder / QDRANT_FOLDER) as client:
        distance = models.Distance(_DISTANCE[metric])
        client.create_collection(QDRANT_COLLECTION, vectors_config=models.VectorParams(size=dim, distance=distance))
        start = 0
        for rows in chunks:
            ids = list(range(start, start + len(rows)))
            client.upsert(QDRANT_COLLECTION, points=models.Batch(ids=ids, vectors=rows.astype(np.float32).tolist()))
            start += len(rows)
    return {"folder": QDRANT_FOLDER, "collection": QDRANT_COLLECTION, "distance": _DISTANCE[metric], "mode": "local"}


class QdrantStore:
    """A local-mode collection: top-k values (faiss's convention) and positions, searched exactly.

    The client is opened for each ``search`` and closed after it, so the folder's lock is held only
    while searching (a second client, in this process or another, is refused while it is held)."""

    def __init__(self, folder: Path, metric: str, ntotal: int) -> None:
        self.path = folder / QDRANT_FOLDER
        if not self.path.is_dir():
            raise FileNotFoundError(
                f"{self.path}: no Qdrant collection in this served index (build it with --stores qdrant)"
            )
        self.models, self.metric, self.ntotal = _qdrant().models, metric, ntotal
        with _client(self.path) as client:
            found = client.get_collection(QDRANT_COLLECTION).config.params.vectors.distance
            count = client.count(QDRANT_COLLECTION, exact=True).count
        if found != self.models.Distance(_DISTANCE[metric]):
            raise ValueError(
                f"{self.path}: its Qdrant distance is {found.value}, but the manifest says {metric} "
                f"({_DISTANCE[metric]}): rebuild the index with scripts/index.py build"
            )
        if count != ntotal:
            raise ValueError(f"{self.path}: holds {count} points, the manifest {ntotal}; rebuild the index")

    def search(self, sent: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(values, positions) of the top ``k`` of every query, best first; l2 values squared as faiss's."""
        k = min(k, self.ntotal)
        values = np.full((len(sent), k), -np.inf if self.metric != "l2" else np.inf, dtype=np.float64)
        positions = np.full((len(sent), k), -1, dtype=np.int64)
        with _client(self.path) as client:
            for first in range(0, len(sent), _QUERY_BATCH):
                block = np.asarray(sent[first : first + _QUERY_BATCH], dtype=np.float32)
                requests = [self.models.QueryRequest(query=row.tolist(), limit=k) for row in block]
                for row, answer in enumerate(client.query_batch_points(QDRANT_COLLECTION, requests=requests)):
                    points = answer.points
                    positions[first + row, : len(points)] = [int(p.id) for p in points]
                    values[first + row, : len(points)] = [p.score for p in points]
        return (values**2 if self.metric == "l2" else values), positions
