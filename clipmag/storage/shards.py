"""WebDataset shards for both front ends: one writer and the reading basics the two readers share.

Shards are tar files of ``<key>.<ext>`` members plus a ``sizes.json`` (shard name -> sample count,
as open_clip's ``get_dataset_size`` reads it). The writer gives members fixed metadata (mtime 0,
mode 644), so the same records give byte-identical shards.

The two front ends' readers (text pairs; images with captions)
differ in what a sample holds and how the stream is ordered, but not in how a shard can be broken.
So the pattern expansion, the ``sizes.json`` reading, the count check and the tar reading live here
and fail in one way: ``ShardError``, whose message names the shard and what was expected of it.

webdataset (which imports torch) is imported by the functions that read or expand shards, so a
command line that only names ``SIZES_FILE`` or checks its settings starts without it.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

SIZES_FILE = "sizes.json"
_READ_ERRORS = (tarfile.TarError, OSError, EOFError)


class ShardError(ValueError):
    """A shard that is missing, unreadable, or not what it should be; the message names it."""


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), 0, 0o644
    tar.addfile(info, io.BytesIO(data))


def write_tar_shards(
    records: Iterable[Mapping[str, bytes | str]],
    directory: str | Path,
    per_shard: int,
    name_format: str = "shard-{:06d}.tar",
) -> list[Path]:
    """Write ``records`` (``{"__key__": key, ext: bytes, ...}``) into shards of ``per_shard`` samples.

    Returns the shard paths in order; raises ValueError when there is no record.
    """
    if per_shard < 1:
        raise ValueError(f"samples per shard must be >= 1, got {per_shard}")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    sizes: dict[str, int] = {}
    tar: tarfile.TarFile | None = None
    try:
        for i, record in enumerate(records):
            if i % per_shard == 0:
                if tar is not None:
                    tar.close()
                paths.append(directory / name_format.format(len(paths)))
                tar = tarfile.open(paths[-1], "w")
                sizes[paths[-1].name] = 0
            key = record["__key__"]
            for ext, data in record.items():
                if ext != "__key__":
                    _add(tar, f"{key}.{ext}", data if isinstance(data, bytes) else str(data).encode("utf-8"))
            sizes[paths[-1].name] += 1
    finally:
        if tar is not None:
            tar.close()
    if not paths:
        raise ValueError(f"no samples to write to {directory}")
    (directory / SIZES_FILE).write_text(json.dumps(sizes, indent=1) + "\n", encoding="utf-8")
    return paths


def expand_shards(pattern: str, what: str = "shards") -> list[str]:
    """Shard urls of a brace pattern (``data/train-{000..009}.tar``; ``::`` joins several patterns),
    expanded as webdataset and open_clip expand them.

    ``what`` names the setting the pattern came from, so the error says which one to fix.
    """
    from webdataset.shardlists import expand_urls

    try:
        urls = [url for url in expand_urls(pattern) if url]
    except Exception as err:  # braceexpand raises its own error classes on malformed patterns
        raise ShardError(f"{what}: cannot expand {pattern!r}: {err}") from None
    if not urls:
        raise ShardError(f"{what}: {pattern!r} names no shards")
    return urls


def declared_sizes(paths: Sequence[str]) -> dict[str, int]:
    """Sample counts (by shard path) that the ``sizes.json`` files beside the shards declare.

    Shards without an entry are left out; remote urls have no ``sizes.json`` that could be read.
    """
    declared: dict[str, int] = {}
    for folder in sorted({os.path.dirname(p) for p in paths}):
        sizes_path = os.path.join(folder, SIZES_FILE)
        if not os.path.isfile(sizes_path):
            continue
        try:
            with open(sizes_path, encoding="utf-8") as fh:
                entries = json.load(fh)
            declared.update({os.path.join(folder, name): int(count) for name, count in entries.items()})
        except (OSError, ValueError, AttributeError, TypeError) as err:
            raise ShardError(f"{sizes_path}: expected a JSON object of shard name -> sample count ({err})") from None
    return declared


def check_count(url: str, count: int, expected: int | None) -> None:
    """A shard that reads as fewer (or more) samples than declared is broken: a truncated tar can
    end cleanly on a member boundary and would otherwise pass for a short shard."""
    if expected is not None and count != expected:
        raise ShardError(f"corrupt shard {url}: read {count} samples, {SIZES_FILE} says {expected}")


def _unreadable(url: str, err: BaseException) -> ShardError:
    reason = " ".join(str(err).split())  # tarfile lists each compression it tried on a line of its own
    return ShardError(f"corrupt shard {url}: not a readable tar file ({type(err).__name__}: {reason})")


def read_samples(url: str, expected: int | None = None) -> Iterator[dict[str, Any]]:
    """The samples of one shard in stored order, as webdataset groups them (``__key__``, ``__url__``
    and one raw ``bytes`` entry per extension, lower-cased).

    A read error, or a count other than ``expected``, raises ShardError naming the shard, instead
    of the bare tarfile error that says nothing about which of many shards is broken.
    """
    from webdataset.gopen import gopen
    from webdataset.tariterators import group_by_keys, tar_file_iterator

    count = 0
    try:
        with gopen(url) as stream:
            files = ({**f, "__url__": url} for f in tar_file_iterator(stream))
            for sample in group_by_keys(files):
                count += 1
                yield sample
    except (*_READ_ERRORS, ValueError) as err:  # group_by_keys raises ValueError on duplicate members
        raise _unreadable(url, err) from err
    check_count(url, count, expected)


def listed_samples(path: str) -> int:
    """Sample count of a local shard from its tar headers alone, for shards no ``sizes.json`` lists."""
    from webdataset.tariterators import base_plus_ext

    try:
        with tarfile.open(path) as tar:
            return len({base_plus_ext(m.name)[0] for m in tar.getmembers() if m.isreg()})
    except _READ_ERRORS as err:
        raise _unreadable(path, err) from err


FINGERPRINT_BYTES = 1 << 20


def shard_fingerprint(path: str | Path) -> str:
    """A cheap content identity of a shard file: its size and a sha256 of its first and last MiB.

    Two splits that hold byte copies of one shard (a test shard copied into the validation folder)
    share a fingerprint though their paths differ; hashing whole shards of a COCO-size set would
    read gigabytes before the first step. Tar members carry their names and sizes in headers at
    both ends, so different shards of equal size differ in these bytes."""
    path = Path(path)
    size = path.stat().st_size
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        digest.update(handle.read(FINGERPRINT_BYTES))
        if size > FINGERPRINT_BYTES:
            handle.seek(max(FINGERPRINT_BYTES, size - FINGERPRINT_BYTES))
            digest.update(handle.read())
    return f"{size}:{digest.hexdigest()}"
