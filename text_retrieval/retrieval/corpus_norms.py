"""Document norms of a corpus too large to hold twice: the raw L2 norm of every row, read in bounded chunks.

The evaluation's magnitude diagnostics and a served index's stored norms both need the raw norms of
a corpus that is often a memory map of the corpus cache; reading it in chunks, and handing each
chunk's pages back, keeps the resident memory bounded by the chunk, not the corpus.
"""

from __future__ import annotations

import numpy as np

from clipmag.scoring.diagnostics import row_norms
from text_retrieval.retrieval.index import release_pages

__all__ = ["corpus_norms"]


def corpus_norms(docs: np.ndarray, rows: int = 65_536) -> np.ndarray:
    """Raw L2 norms (float64) of a possibly memory-mapped corpus, read in bounded chunks."""
    norms = np.empty(len(docs), dtype=np.float64)
    for start in range(0, len(docs), rows):
        norms[start : start + rows] = row_norms(docs[start : start + rows])
        release_pages(docs, start, min(start + rows, len(docs)))
    return norms
