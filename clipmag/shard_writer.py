"""One WebDataset shard writer for both front ends: tar files of ``<key>.<ext>`` members plus a
``sizes.json`` (shard name -> sample count, as open_clip's ``get_dataset_size`` reads it).

Members get fixed metadata (mtime 0, mode 644), so the same records give byte-identical shards.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Iterable, Mapping

SIZES_FILE = "sizes.json"


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), 0, 0o644
    tar.addfile(info, io.BytesIO(data))


def write_tar_shards(records: Iterable[Mapping[str, bytes | str]], directory: str | Path, per_shard: int,
                     name_format: str = "shard-{:06d}.tar") -> list[Path]:
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
