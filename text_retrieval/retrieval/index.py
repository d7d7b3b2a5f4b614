"""What every index shares: the retrieval settings, the index interface and the head's transforms.

Exact search (``search.py``) and approximate indexes (``ann.py``) both hold the corpus in its
document-side-transformed form and scale the raw query's scores by the query factor afterwards.
"""

from __future__ import annotations

import mmap
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from text_retrieval.retrieval.compression import Compression

if TYPE_CHECKING:
    from clipmag.scoring.heads import SimilarityHead

__all__ = [
    "Run",
    "RetrievalSettings",
    "Index",
    "head_transform",
    "query_factor",
    "release_pages",
    "METHODS",
    "BACKENDS",
    "ANN_TRANSFORMS",
    "CACHE_DTYPES",
    "HYBRIDS",
]

# What a search returns and the metrics read: query id -> {document id: score}, as pytrec_eval takes it.
Run = dict[str, dict[str, float]]

METHODS = ("exact", "hnsw", "ivf")
BACKENDS = ("auto", "torch", "faiss")
ANN_TRANSFORMS = ("none", "mips")
CACHE_DTYPES = {"fp32": np.float32, "fp16": np.float16}
HYBRIDS = ("none", "rrf", "minmax", "zscore")  # BM25 fused with the dense run (text_retrieval/retrieval/fusion.py)


@dataclass(frozen=True)
class RetrievalSettings:
    """How a corpus is encoded, cached and searched.

    ``chunk_size``: corpus rows per encoding chunk (the unit of sharding over ranks and of resuming);
    ``cache_dtype``: ``fp32`` or ``fp16`` storage of the cached embeddings; ``distributed``: share
    the chunks out over the ranks of ``torch.distributed`` (``text_retrieval/retrieval/corpus_cache.py``).
    ``method``: ``exact``, or an approximate ``hnsw`` / ``ivf`` index whose recall against exact is
    reported; ``ann_transform``: for those, ``none`` indexes the documents as they are, ``mips``
    brought to one norm by the reduction of inner-product to nearest-neighbour search (what each
    measured: ``text_retrieval/retrieval/mips.py``); ``backend``: the exact backend (``auto``: timed
    per case); ``memory_gb``: the bound on the transformed corpus plus score buffers held at once
    (larger corpora are searched in chunks). ``compression``: how the documents are stored
    (``none``, ``truncate:K``, ``int8``, ``int8-floor``, ``binary``, each with ``+norm`` to keep the norm;
    ``text_retrieval/retrieval/compression.py``); ``hybrid``: ``none``, or BM25 fused with the dense
    run by ``rrf``, ``minmax`` or ``zscore`` (``text_retrieval/retrieval/fusion.py``).
    """

    chunk_size: int = 10_000
    cache_dtype: str = "fp32"
    distributed: bool = False
    method: str = "exact"
    backend: str = "auto"
    memory_gb: float = 4.0
    ann_transform: str = "none"
    compression: str = "none"
    hybrid: str = "none"

    def __post_init__(self) -> None:
        Compression.parse(self.compression)  # a wrong setting is refused here, naming the valid ones
        choices = {
            "cache_dtype": CACHE_DTYPES,
            "method": METHODS,
            "backend": BACKENDS,
            "ann_transform": ANN_TRANSFORMS,
            "hybrid": HYBRIDS,
        }
        for key, valid in choices.items():
            if getattr(self, key) not in valid:
                raise ValueError(f"{key} {getattr(self, key)!r} unknown; valid: {', '.join(valid)}")
        if self.ann_transform != "none" and self.method == "exact":
            raise ValueError(
                f"ann_transform {self.ann_transform!r} applies to the approximate methods (hnsw, ivf), not exact"
            )
        if self.chunk_size < 1 or not self.memory_gb > 0:
            raise ValueError(f"chunk_size and memory_gb must be positive, got {self.chunk_size}, {self.memory_gb}")

    @property
    def encodes_only(self) -> bool:
        """True on the ranks other than 0 of a distributed evaluation: they only help encode the corpus."""
        import torch.distributed as dist  # here, not at the top: a command line reads these settings without torch

        return self.distributed and dist.is_initialized() and dist.get_rank() != 0


class Index(Protocol):
    ntotal: int

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]: ...


def head_transform(head: SimilarityHead, vectors: np.ndarray, side: str) -> np.ndarray:
    """Apply one side of the head to raw vectors (any float dtype), returning contiguous float32."""
    import torch  # a head is a torch module, so torch is loaded already; the settings above need none

    with torch.no_grad():
        x = torch.from_numpy(np.array(vectors, dtype=np.float32, order="C", copy=True))
        y = head.transform_query(x) if side == "query" else head.transform_document(x)
    return np.ascontiguousarray(y.float().numpy())


def query_factor(head: SimilarityHead, raw: np.ndarray) -> np.ndarray:
    """Per-query positive factor ``|transform_query(q)| / |q|`` (``|q|^-gq`` for our heads)."""
    transformed = head_transform(head, raw, "query")
    raw_norm = np.linalg.norm(raw.astype(np.float64), axis=1)
    factor = np.linalg.norm(transformed.astype(np.float64), axis=1) / np.maximum(raw_norm, np.finfo(np.float64).tiny)
    return np.where(raw_norm > 0, factor, 1.0)


def release_pages(array: np.ndarray, start: int, stop: int) -> None:
    """Drop rows ``[start, stop)`` of a memory-mapped array from resident memory (no-op otherwise).

    Pages read from (or written to) a memory map count as resident until the kernel needs them;
    advising them away after each chunk keeps a pass over a corpus larger than RAM bounded.
    """
    handle = getattr(array, "_mmap", None)
    if handle is None or not hasattr(mmap, "MADV_DONTNEED") or stop <= start:
        return
    row = array.strides[0]  # numpy maps from the file offset rounded down to the allocation granularity
    base = int(getattr(array, "offset", 0)) % mmap.ALLOCATIONGRANULARITY + start * row
    first = base - base % mmap.PAGESIZE
    if array.flags.writeable:
        handle.flush()  # written rows reach the file before their pages are dropped
    handle.madvise(mmap.MADV_DONTNEED, first, base + (stop - start) * row - first)
