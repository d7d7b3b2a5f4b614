"""Corpus embeddings, cached on disk: encoded in resumable chunks, sharded over torchrun ranks.

The cache stores *raw* embeddings (norm diagnostics need them and one cache serves every head) in
one memory-mapped ``embeddings.npy`` per folder, keyed by everything that changes them: model path
and a weights digest, pooling, document prefix and max length, the autocast dtype it is encoded in
(``encoder.precision`` resolved on its device), storage dtype and the corpus content.

The corpus is cut into chunks of ``chunk_size`` rows, the unit of sharding and of resuming:

* every chunk is one ``encoder.encode`` call whose rows go straight into the memory map
  (``embeddings.partial.npy``), and only after they reached the file is the chunk marked done
  (``chunks/<index>.done``); an interrupted encode continues with the unmarked chunks and never
  reuses a partly written one;
* under torchrun (``distributed=True``) rank r encodes chunks r, r + N, r + 2N ... into the same
  file; chunk boundaries do not depend on N, so N processes write the rows one process would, from
  the same batches;
* when every chunk is done, rank 0 writes ``identity.json`` and renames the file to
  ``embeddings.npy``. ``dtype="fp16"`` halves disk and memory; search reads chunks back as fp32.

Two evaluations may share one ``cache_dir``: a build holds the cache folder's lock
(:class:`clipmag.storage.folder_lock.FolderLock`, taken by rank 0), so a second evaluation of the
same corpus waits, with a line naming the builder's pid, and then reads the finished cache instead
of writing into a live build. The kernel drops the lock with its holder, so partial files found
under the lock are a stopped build's: they are resumed (or cleared, for another layout) and said.

A finished cache is checked before it is used - its header, its size against the shape and dtype
the header declares, and the document count ``identity.json`` records - because a truncated memory
map fails deep inside numpy (``mmap length is greater than file size``) on every later run, or
worse, reads past its end during search. A damaged one is removed with a warning naming it and
encoded again; where it cannot be removed, the error names the folder to delete.

Without ``cache_dir`` (validation during training) the corpus is encoded in memory by one process,
stored in the settings' ``cache_dtype`` as well. The process group the ranks share is set up by
:func:`text_retrieval.retrieval.shared_encoding.shared_encoding`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from clipmag.runtime import distributed as dist_utils
from clipmag.runtime.precision import autocast_dtype
from clipmag.storage.folder_lock import FolderLock
from clipmag.storage.naming import folder_part, slug
from text_retrieval.model.encoder import TextEncoder
from text_retrieval.retrieval.index import CACHE_DTYPES, RetrievalSettings, release_pages

logger = logging.getLogger("clipmag")

__all__ = ["DamagedCacheError", "corpus_cache_key", "encode_corpus"]

CACHE_VERSION = 2
_PARTIAL, _LAYOUT, _DONE = "embeddings.partial.npy", "partial.json", "chunks"


class DamagedCacheError(ValueError):
    """A finished corpus cache that is unusable and cannot be removed; the message names what to delete."""


def corpus_cache_key(
    encoder: TextEncoder, dataset_name: str, dataset_fingerprint: str, dtype: str = "fp32"
) -> tuple[str, dict[str, str]]:
    """Cache folder name and the identity it hashes (recorded next to the embeddings)."""
    identity = {
        "cache_version": str(CACHE_VERSION),
        "model": encoder.name_or_path,
        "weights": encoder.weights_fingerprint(),
        "pooling": encoder.pooling,
        "document_prefix": encoder.document_prefix,
        "document_max_length": str(encoder.document_max_length),
        "autocast": str(autocast_dtype(encoder.precision, encoder.device) or "fp32").replace("torch.", ""),
        "dtype": dtype,
        "dataset": dataset_name,
        "corpus": dataset_fingerprint,
    }
    digest = hashlib.sha1(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]
    model_tag = slug(Path(encoder.name_or_path.rstrip("/")).name, fallback="model")
    return f"{folder_part(dataset_name, 'corpus')}__{model_tag}__{digest}", identity


def _damage(folder: Path, shape: tuple[int, int], dtype: np.dtype) -> str | None:
    """What is wrong with the finished cache in ``folder`` for a corpus of ``shape``, or None if nothing."""
    target = folder / "embeddings.npy"
    try:
        with open(target, "rb") as fh:
            version = np.lib.format.read_magic(fh)
            read_header = (
                np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            )
            found_shape, fortran, found_dtype = read_header(fh)
            offset = fh.tell()
    except Exception as err:  # numpy's parse of overwritten bytes raises ValueError, SyntaxError, TokenError ...
        return f"unreadable header ({type(err).__name__}: {err})"
    if tuple(found_shape) != shape or found_dtype != dtype or fortran:
        return f"holds a {found_shape} {found_dtype} array, expected {shape} {dtype}"
    size, needed = target.stat().st_size, offset + int(np.prod(shape)) * dtype.itemsize
    if size != needed:
        return f"{size} bytes where its header's {found_shape} {found_dtype} array needs {needed}: cut short?"
    try:
        recorded = json.loads((folder / "identity.json").read_text(encoding="utf-8"))["num_documents"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        return f"no readable identity.json beside it ({type(err).__name__}: {err})"
    if recorded != shape[0]:
        return f"identity.json records {recorded} documents, the embeddings hold {shape[0]}"
    return None


def _discard(folder: Path, damage: str) -> None:
    """Rank 0: remove a damaged finished cache so that it is encoded again; else say what to delete."""
    try:
        for name in ("embeddings.npy", "identity.json"):
            (folder / name).unlink(missing_ok=True)
    except OSError as err:
        raise DamagedCacheError(
            f"corpus cache {folder / 'embeddings.npy'} is damaged ({damage}) and cannot be removed "
            f"({type(err).__name__}: {err}); delete the folder {folder} and run again"
        ) from None


def _open_partial(folder: Path, shape: tuple[int, int], dtype: str, chunk_size: int) -> None:
    """Rank 0: keep a partial file of this layout (resume), else start a new one with no chunk done."""
    layout = {"shape": list(shape), "dtype": dtype, "chunk_size": chunk_size}
    try:
        same = json.loads((folder / _LAYOUT).read_text()) == layout
        np.load(folder / _PARTIAL, mmap_mode="r")  # a header cut short by a kill raises here
    except (OSError, ValueError):
        same = False
    if same:
        logger.info("resuming the corpus encoding in %s", folder)
        return
    shutil.rmtree(folder / _DONE, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / _DONE).mkdir()
    np.lib.format.open_memmap(folder / _PARTIAL, mode="w+", dtype=CACHE_DTYPES[dtype], shape=shape).flush()
    (folder / _LAYOUT).write_text(json.dumps(layout))


def _encode_chunks(
    encoder: TextEncoder, texts: Sequence[str], folder: Path, chunk_size: int, ranks: tuple[int, int], **encode: Any
) -> int:
    """Encode the unfinished chunks of rank ``ranks[0]`` of ``ranks[1]`` into the partial file; how many."""
    rank, world = ranks
    out = np.load(folder / _PARTIAL, mmap_mode="r+")
    encoded = 0
    for index, start in enumerate(range(0, len(texts), chunk_size)):
        marker = folder / _DONE / f"{index}.done"
        if index % world != rank or marker.exists():
            continue
        stop = min(start + chunk_size, len(texts))
        out[start:stop] = encoder.encode(texts[start:stop], "document", **encode)
        release_pages(out, start, stop)  # flushes the rows to the file first
        marker.touch()
        encoded += 1
    del out
    return encoded


def encode_corpus(
    encoder: TextEncoder,
    texts: Sequence[str],
    cache_dir: str | Path | None = None,
    dataset_name: str = "corpus",
    dataset_fingerprint: str = "",
    batch_size: int = 64,
    show_progress: bool = True,
    settings: RetrievalSettings | None = None,
) -> np.ndarray:
    """Raw document embeddings [N, D], from the cache when complete, else encoded chunk by chunk.

    With ``cache_dir`` the result is a read-only memory map of ``embeddings.npy``. ``settings``
    give the chunk size, the cache dtype and whether the chunks are shared out over the ranks
    (module docstring; every rank must then call).
    """
    settings = settings or RetrievalSettings()
    chunk_size, dtype, distributed = settings.chunk_size, settings.cache_dtype, settings.distributed
    encode = {"batch_size": batch_size, "show_progress": show_progress}
    if cache_dir is None or not texts:
        stored = CACHE_DTYPES[dtype]  # the storage dtype holds in memory too, chunk by chunk
        starts = range(0, len(texts), chunk_size)
        parts = [encoder.encode(texts[i : i + chunk_size], "document", **encode).astype(stored) for i in starts]
        return np.concatenate(parts) if parts else np.zeros((0, encoder.dim), stored)
    if not dataset_fingerprint:
        dataset_fingerprint = hashlib.sha1("\0".join(texts).encode()).hexdigest()[:16]
    key, identity = corpus_cache_key(encoder, dataset_name, dataset_fingerprint, dtype)
    folder = Path(cache_dir) / key
    target, shape, stored = folder / "embeddings.npy", (len(texts), encoder.dim), np.dtype(CACHE_DTYPES[dtype])
    ranks = (dist_utils.get_rank(), dist_utils.get_world_size()) if distributed else (0, 1)
    sync = dist_utils.barrier if distributed else (lambda: None)
    main = ranks[0] == 0
    # a finished cache is read without the lock (a read-only cache folder serves too); rank 0's view
    # decides for every rank, as another evaluation may finish the cache between two ranks' looks
    finished = target.is_file() and _damage(folder, shape, stored) is None
    if dist_utils.all_gather_objects(finished)[0] if distributed else finished:
        logger.info("corpus embeddings from cache %s", folder)
        return np.load(target, mmap_mode="r")
    with _build_lock(folder, main, sync):
        if target.is_file():  # under the lock nobody else writes, so every rank takes the same branch
            damage = _damage(folder, shape, stored)
            if damage is None:  # another evaluation finished it while this one waited
                logger.info("corpus embeddings from cache %s", folder)
                return np.load(target, mmap_mode="r")
            if main:
                logger.warning(
                    "corpus cache %s is damaged (%s); removing it and encoding the corpus again", target, damage
                )
                _discard(folder, damage)
        if main:
            _open_partial(folder, shape, dtype, chunk_size)
        sync()
        encoded = _encode_chunks(encoder, texts, folder, chunk_size, ranks, **encode)
        sync()
        if main:
            _finish(folder, identity, len(texts), chunk_size)
            logger.info("cached corpus embeddings in %s (%d chunks encoded by rank 0)", folder, encoded)
        sync()
    return np.load(target, mmap_mode="r")


@contextmanager
def _build_lock(folder: Path, main: bool, sync: Callable[[], None]) -> Iterator[None]:
    """Rank 0 holds the cache folder's lock while the ranks build it: another evaluation sharing the
    cache waits, saying for whom, and then reads what this one built. Partial files found once the
    lock is taken are a stopped build's (its holder is gone), which ``_open_partial`` resumes or clears."""
    lock = FolderLock(folder, "corpus cache build")
    if main:
        lock.acquire(wait=True)
        dead = lock.left_by
        if dead and (folder / _LAYOUT).exists():
            logger.warning(
                "%s: the build by pid %s on %s stopped before it finished; it is no longer running",
                folder,
                dead.get("pid", "?"),
                dead.get("host", "?"),
            )
    sync()
    try:
        yield
    finally:
        lock.release()


def _finish(folder: Path, identity: dict[str, str], documents: int, chunk_size: int) -> None:
    """Rank 0, every chunk written: name the file ``embeddings.npy`` after its identity is beside
    it, so that a finished cache is whole the moment it appears to a reader without the lock."""
    missing = [i for i in range(-(-documents // chunk_size)) if not (folder / _DONE / f"{i}.done").exists()]
    if missing:
        raise RuntimeError(f"{folder}: corpus chunks {missing[:10]} were not encoded; run again to resume")
    created = time.strftime("%Y-%m-%dT%H:%M:%S")
    record = {**identity, "num_documents": documents, "chunk_size": chunk_size, "created": created}
    (folder / "identity.json").write_text(json.dumps(record, indent=2))
    os.replace(folder / _PARTIAL, folder / "embeddings.npy")
    shutil.rmtree(folder / _DONE)
    (folder / _LAYOUT).unlink()
