"""The process group of an evaluation or a mining run: under torchrun the ranks share each corpus's encoding.

The corpus cache (:mod:`text_retrieval.retrieval.corpus_cache`) shares a corpus's chunks out over
the ranks; this sets up the ranks it shares them over, and where they write when no cache folder
was given.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from clipmag.runtime import distributed as dist_utils

__all__ = ["shared_encoding", "TEMPORARY_CACHE"]

TEMPORARY_CACHE = "corpus_cache.tmp"
# Ranks other than 0 wait in the next corpus's first barrier while rank 0 searches and scores the
# previous one, which on a large corpus takes far longer than torch.distributed's default 30 minutes.
_WAIT_MINUTES = 24 * 60


@contextmanager
def shared_encoding(output: str | Path, cache_dir: str | Path | None) -> Iterator[tuple[Path | None, bool]]:
    """An evaluation's process group: under torchrun every rank joins (gloo on CPU, NCCL on GPU) and
    the ranks share each corpus's encoding, into ``cache_dir`` or, without one, a temporary cache
    under ``output`` that rank 0 removes at the end. Yields (the cache folder to use, distributed)."""
    ctx = dist_utils.init_distributed("auto", timeout_minutes=_WAIT_MINUTES)
    temporary = ctx.is_distributed and cache_dir is None
    cache = Path(output) / TEMPORARY_CACHE if temporary else (Path(cache_dir) if cache_dir else None)
    try:
        yield cache, ctx.is_distributed
        if temporary and ctx.is_main:  # the other ranks stopped reading it at their last corpus's barrier
            shutil.rmtree(cache, ignore_errors=True)
    finally:
        dist_utils.cleanup()
