"""The manifest stored with a served index: which model made it, under which head, from which corpus.

A served index is only right for queries encoded by the model, head and document settings that
encoded its documents; nothing in a vector store says which those were. ``manifest.json`` records
them - the model path, its weights fingerprint (``TextEncoder.weights_fingerprint``), the head
record (head with its gammas, pooling, prefixes, max lengths), the corpus fingerprint, the layout
(metric, MIPS norm), the stores, the compression and the commit of the code that built it - and
``check_encoder`` refuses, in one line naming what differs, a query encoder that is not that model.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from clipmag.scoring.head_record import HeadRecord
from clipmag.storage.files import write_text_atomic
from clipmag.storage.user_files import read_json

__all__ = ["MANIFEST_FILE", "IDS_FILE", "NORMS_FILE", "STORES", "Corpus", "IndexManifest", "encoder_identity"]

MANIFEST_FILE, IDS_FILE, NORMS_FILE = "manifest.json", "ids.json", "norms.npy"
FORMAT_VERSION = 1
# What a query encoder must share with the one that encoded the documents (its query settings may differ).
_CHECKED = ("weights", "head", "pooling", "document_prefix", "document_max_length")

STORES = ("faiss", "lancedb", "qdrant")  # the vector stores an index folder can hold


@dataclass
class Corpus:
    """The documents to index: a name (the corpus cache's), ids and texts in order, their fingerprint and source."""

    name: str
    ids: list[str]
    texts: list[str]
    fingerprint: str
    source: str


def encoder_identity(encoder: Any) -> dict[str, Any]:
    """What decides a text encoder's document embeddings and scores (the keys ``check_encoder`` compares)."""
    record, model = encoder.head_record(), encoder.name_or_path
    return {
        "model": str(Path(model).resolve()) if Path(model).exists() else model,  # a folder: found from anywhere
        "weights": encoder.weights_fingerprint(),
        "head": record.head,
        "pooling": record.pooling,
        "document_prefix": record.document_prefix,
        "document_max_length": record.document_max_length,
    }


@dataclass
class IndexManifest:
    """Everything ``manifest.json`` holds (``format_version`` 1); ``encoder`` is ``encoder_identity``."""

    encoder: dict[str, Any]
    head_record: dict[str, Any]
    corpus: dict[str, Any]
    documents: int
    dim: int
    metric: str
    mips_norm: float | None
    compression: dict[str, Any]
    stores: dict[str, dict[str, Any]]
    code: dict[str, Any]
    numerics: dict[str, Any] = field(default_factory=dict)
    created: str = ""
    format_version: int = FORMAT_VERSION

    @property
    def record(self) -> HeadRecord:
        return HeadRecord.from_dict(self.head_record, source=f"{MANIFEST_FILE}: 'head_record'")

    def check_encoder(self, encoder: Any, folder: Path) -> None:
        """Refuse a query encoder whose weights, head or document settings differ from the index's."""
        theirs = encoder_identity(encoder)
        differ = [key for key in _CHECKED if self.encoder.get(key) != theirs[key]]
        if differ:
            shown = "; ".join(f"{key} {theirs[key]!r} here, {self.encoder.get(key)!r} in the index" for key in differ)
            raise ValueError(
                f"{folder}: built with {self.encoder.get('model')} and cannot serve queries encoded by "
                f"{encoder.name_or_path}: {shown}; query with the index's model and head, or rebuild the index"
            )

    def write(self, folder: Path) -> Path:
        return write_text_atomic(folder / MANIFEST_FILE, json.dumps(asdict(self), indent=1, default=str) + "\n")

    @classmethod
    def read(cls, folder: Path) -> IndexManifest:
        path = folder / MANIFEST_FILE
        if not path.is_file():
            raise FileNotFoundError(f"{path}: not a served index (no {MANIFEST_FILE}; build one with scripts/index.py)")
        values = read_json(path)
        if not isinstance(values, dict) or values.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"{path}: expected a served-index manifest with format_version {FORMAT_VERSION}")
        known = set(cls.__dataclass_fields__)
        missing = sorted(known - set(values) - {"numerics", "created"})
        if missing:
            raise ValueError(f"{path}: missing key(s) {', '.join(missing)}; rebuild the index")
        return cls(**{k: v for k, v in values.items() if k in known})
