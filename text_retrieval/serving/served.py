"""A served index: build one from an export and a corpus, open one and search it as ``eval_text.py`` does.

A served index is a folder::

    manifest.json   model, weights fingerprint, head record, corpus, metric, stores, commit
    ids.json        the document ids, in the stores' order
    norms.npy       each document's raw norm (the norm diagnostics of an evaluation through the index)
    index.faiss     the faiss index (flat, HNSW or IVF), when built
    lancedb/        the LanceDB table ``documents`` (id, vector), when built
    qdrant/         the Qdrant local-mode collection ``documents`` (point id = position), when built

The corpus is encoded exactly as ``eval_text.py`` encodes it (``encode_corpus`` under the same
evaluation settings, so a corpus cache is shared), optionally compressed
(``text_retrieval/retrieval/compression.py``: the stores then hold the reconstruction the compressed
evaluation scores, and the manifest the code size), laid out for the head
(``text_retrieval/serving/layout.py``) and written to each store. The folder is written beside its
destination and moved into place when complete; an existing one is replaced only when asked.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from clipmag.results.provenance import code_state
from clipmag.results.record import encoding_numerics
from clipmag.scoring.heads import build_head
from clipmag.storage.finite import NonFiniteWeights
from clipmag.storage.folder_lock import FolderLock
from text_retrieval.data.loaders import EvalSettings, RetrievalDataset
from text_retrieval.model.encoder import TextEncoder
from text_retrieval.retrieval.compression import Compression
from text_retrieval.retrieval.corpus_cache import encode_corpus
from text_retrieval.retrieval.corpus_norms import corpus_norms
from text_retrieval.retrieval.encoding import evaluation_encoding, with_export_lengths
from text_retrieval.serving.faiss_store import FaissStore, build_faiss
from text_retrieval.serving.lance_store import LanceStore, build_lance
from text_retrieval.serving.layout import Layout, check_metric
from text_retrieval.serving.manifest import IDS_FILE, NORMS_FILE, STORES, Corpus, IndexManifest, encoder_identity
from text_retrieval.serving.qdrant_store import QdrantStore, build_qdrant

__all__ = ["build_served_index", "ServedIndex", "open_for_dataset"]

_CHUNK_ROWS = 65_536


def _chunks(vectors: np.ndarray) -> Iterator[np.ndarray]:
    for start in range(0, len(vectors), _CHUNK_ROWS):
        yield np.asarray(vectors[start : start + _CHUNK_ROWS], dtype=np.float32)


def _mips_norm(layout: Layout, docs: np.ndarray) -> float:
    """The largest head-transformed document norm (a first pass: the reduction needs it before storing)."""
    return max((float(np.linalg.norm(r, axis=1).max(initial=0.0)) for r in layout.documents(_chunks(docs))), default=0)


def _require_finite_embeddings(docs: Any, ids: Sequence[str], output: Path) -> None:
    """Refuse to serve embeddings holding inf or nan (a model with broken weights): their scores would
    rank the corpus arbitrarily. The message names the first such document."""
    bad = ~np.isfinite(np.asarray(docs)).all(axis=1)
    if bad.any():
        raise NonFiniteWeights(
            f"{output}: not written: the embedding of document {ids[int(bad.argmax())]!r} holds inf or nan "
            f"({int(bad.sum())} of {len(ids)} documents); check the model's weights"
        )


def build_served_index(
    encoder: TextEncoder, corpus: Corpus, output: str | Path, overwrite: bool = False, **options: Any
) -> IndexManifest:
    """Encode ``corpus`` with ``encoder`` under its head and write a served index to ``output``
    (``options``: those of :func:`_write_served_index`). Two builds into one output never mix: each
    holds the lock of the staging folder ``<output>.partial`` from its check that ``output`` is new
    (or ``overwrite`` given) to the rename, so a second stops at once naming the first, and a build
    refused here leaves no staging folder."""
    output = Path(output)
    with FolderLock(output.with_name(output.name + ".partial"), "index build") as staging:
        if output.exists() and not overwrite:
            raise ValueError(f"{output} exists; pass --overwrite to replace it")
        return _write_served_index(encoder, corpus, output, staging, **options)


def _write_served_index(
    encoder: TextEncoder,
    corpus: Corpus,
    output: Path,
    staging: FolderLock,
    stores: Sequence[str] = STORES,
    faiss_kind: str = "flat",
    metric: str = "ip",
    mips: bool = False,
    compression: str = "none",
    settings: EvalSettings | None = None,
    batch_size: int = 64,
    cache_dir: str | Path | None = None,
    show_progress: bool = True,
) -> IndexManifest:
    """The index of ``corpus`` written in the held ``staging`` folder, then renamed to ``output``."""
    check_metric(encoder.head, metric, mips)
    unknown = [s for s in stores if s not in STORES]
    if not stores or unknown:
        raise ValueError(f"stores {list(stores)}: give one or more of {', '.join(STORES)}")
    settings = with_export_lengths(settings or EvalSettings(), encoder)
    with evaluation_encoding(encoder, settings, corpus.name):
        identity, record = encoder_identity(encoder), encoder.head_record()
        raw = encode_corpus(
            encoder, corpus.texts, cache_dir, corpus.name, corpus.fingerprint, batch_size, show_progress=show_progress
        )
    compressed = Compression.parse(compression)
    docs, described = raw, compressed.describe(raw.shape[1])
    if not compressed.is_none:
        codes = compressed.fit(raw).encode(raw)
        docs, described = compressed.decode(codes, raw.shape[1]), compressed.describe(raw.shape[1], codes)
    _require_finite_embeddings(docs, corpus.ids, output)
    layout = Layout(encoder.head, metric, _mips_norm(Layout(encoder.head), docs) if mips else None)
    staging.empty()  # what a build that died there left half written
    partial = staging.folder
    dim = docs.shape[1] + int(mips)
    written: dict[str, dict[str, Any]] = {}
    if "faiss" in stores:
        written["faiss"] = build_faiss(layout.documents(_chunks(docs)), faiss_kind, dim, len(docs), metric, partial)
    if "lancedb" in stores:
        written["lancedb"] = build_lance(layout.documents(_chunks(docs)), corpus.ids, partial, metric)
    if "qdrant" in stores:
        written["qdrant"] = build_qdrant(layout.documents(_chunks(docs)), partial, dim, metric)
    (partial / IDS_FILE).write_text(json.dumps(corpus.ids) + "\n", encoding="utf-8")
    np.save(partial / NORMS_FILE, corpus_norms(raw).astype(np.float32))
    manifest = IndexManifest(
        encoder=identity,
        head_record=record.to_dict(),
        corpus={"name": corpus.name, "fingerprint": corpus.fingerprint, "source": corpus.source},
        documents=len(corpus.ids),
        dim=dim,
        metric=metric,
        mips_norm=layout.mips_norm,
        compression=described,
        stores=written,
        code=dict(code_state()),
        numerics=encoding_numerics(encoder.precision, encoder.device),
        created=time.strftime("%Y-%m-%dT%H:%M:%S"),
    )
    manifest.write(partial)
    if output.exists():
        shutil.rmtree(output)
    partial.rename(output)
    return manifest


class ServedIndex:
    """An opened served index, searched through one store; an ``Index`` whose ``search`` takes raw queries
    and applies the head's query side itself (``applies_query_side``), returning the head's scores."""

    applies_query_side = True

    def __init__(self, folder: str | Path, store: str = "auto") -> None:
        self.folder = Path(folder)
        self.manifest = IndexManifest.read(self.folder)
        self.ids: list[str] = json.loads((self.folder / IDS_FILE).read_text(encoding="utf-8"))
        self.ntotal = len(self.ids)
        self.head = build_head(self.manifest.record)
        self.layout = Layout(self.head, self.manifest.metric, self.manifest.mips_norm)
        self.compression = Compression.parse(str(self.manifest.compression.get("compression", "none")))
        built = [s for s in STORES if s in self.manifest.stores]
        self.store_name = built[0] if store == "auto" else store
        if self.store_name not in built:
            raise ValueError(f"{self.folder}: no {self.store_name} store in this index (built: {', '.join(built)})")
        metric = self.manifest.metric
        if self.store_name == "faiss":
            self.store: FaissStore | LanceStore | QdrantStore = FaissStore(self.folder, metric, self.ntotal)
        elif self.store_name == "lancedb":
            self.store = LanceStore(self.folder, metric, self.ids)
        else:
            self.store = QdrantStore(self.folder, metric, self.ntotal)
        self.described = {
            "method": "served index",
            "index": str(self.folder),
            "store": self.store_name,
            "metric": self.manifest.metric,
            "mips_norm": self.manifest.mips_norm,
            **self.manifest.compression,
            self.store_name: self.manifest.stores[self.store_name],
        }

    def document_norms(self) -> np.ndarray:
        return np.load(self.folder / NORMS_FILE)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The head's scores (float64) and positions of the top ``k`` documents of raw ``queries``."""
        sent = self.layout.queries(self.compression.queries(np.asarray(queries, dtype=np.float32)))
        values, positions = self.store.search(sent, k)
        return self.layout.scores(values, sent), positions


def open_for_dataset(folder: str | Path, encoder: TextEncoder, dataset: RetrievalDataset, store: str) -> ServedIndex:
    """The served index at ``folder``, refused in one line unless ``encoder`` is its model under its head
    (call inside the evaluation's encoding settings) and ``dataset``'s corpus is the one it holds."""
    served = ServedIndex(folder, store)
    served.manifest.check_encoder(encoder, served.folder)
    corpus = served.manifest.corpus
    if corpus.get("fingerprint") != dataset.fingerprint:
        raise ValueError(
            f"{served.folder}: holds the corpus {corpus.get('name')!r} ({served.ntotal} documents, fingerprint "
            f"{corpus.get('fingerprint')}), not {dataset.name!r}'s ({len(dataset.corpus_ids)} documents, "
            f"fingerprint {dataset.fingerprint}); build an index of this corpus"
        )
    return served
