"""Fetch the public evaluation sets into the local layouts the loaders read.

Network access is checked first with a short connection attempt, so an offline machine gets an
immediate, explicit error (with the URL to fetch by hand) instead of a long hang in a retry loop.
Nothing here runs in the test suite; the loaders are tested on local files.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import tarfile
import tempfile
import urllib.request
import zipfile
from pathlib import Path
from urllib.parse import urlparse

from tqdm.auto import tqdm

from text_retrieval.data.bright import BRIGHT_TASKS

logger = logging.getLogger("clipmag")

__all__ = ["BEIR_URL", "STS_SOURCES", "download_beir", "download_bright", "download_sts", "check_online"]

BEIR_URL = "https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets/{name}.zip"
BRIGHT_REPO = "xlangai/BRIGHT"
STS_SOURCES = {
    "stsbenchmark": "https://ixa2.si.ehu.eus/stswiki/images/4/48/Stsbenchmark.tar.gz",
    "sickr": "https://zenodo.org/record/2787612/files/SICK.zip",
}


def check_online(url: str, timeout: float = 5.0) -> None:
    """Raise ``ConnectionError`` at once when ``url``'s host cannot be reached."""
    if os.environ.get("HF_HUB_OFFLINE") == "1" and "huggingface.co" in url:
        raise ConnectionError(f"HF_HUB_OFFLINE=1 is set; cannot fetch {url}. Unset it or copy the data by hand.")
    host = urlparse(url).hostname or url
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
    except OSError as err:
        raise ConnectionError(
            f"cannot reach {host} ({err}); this machine looks offline. Fetch {url} on a connected machine "
            "and unpack it into the target folder."
        ) from None


def _fetch(url: str, target: Path) -> Path:
    check_online(url)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(target.suffix + ".part")
    with urllib.request.urlopen(url, timeout=30) as response, open(partial, "wb") as out:
        total = int(response.headers.get("Content-Length") or 0) or None
        with tqdm(total=total, unit="B", unit_scale=True, desc=target.name) as bar:
            while chunk := response.read(1 << 20):
                out.write(chunk)
                bar.update(len(chunk))
    os.replace(partial, target)
    return target


def _unpack(archive: Path, into: Path) -> None:
    if archive.suffix == ".zip":
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(into)
    else:
        with tarfile.open(archive) as tf:
            tf.extractall(into, filter="data")


def download_beir(name: str, root: str | Path) -> Path:
    """Download and unpack BEIR dataset ``name`` (e.g. ``scifact``) into ``root/name``."""
    root = Path(root)
    folder = root / name
    if (folder / "qrels").is_dir():
        logger.info("%s already present", folder)
        return folder
    with tempfile.TemporaryDirectory(dir=root if root.exists() else None) as tmp:
        archive = _fetch(BEIR_URL.format(name=name), Path(tmp) / f"{name}.zip")
        _unpack(archive, root)
    return folder


def download_sts(name: str, root: str | Path) -> Path:
    """Download ``stsbenchmark`` or ``sickr`` into ``root/name`` (the loaders read these as found)."""
    if name not in STS_SOURCES:
        raise ValueError(f"unknown STS source {name!r}; known: {sorted(STS_SOURCES)}")
    folder = Path(root) / name
    folder.mkdir(parents=True, exist_ok=True)
    url = STS_SOURCES[name]
    with tempfile.TemporaryDirectory() as tmp:
        archive = _fetch(url, Path(tmp) / Path(urlparse(url).path).name)
        unpacked = Path(tmp) / "unpacked"
        _unpack(archive, unpacked)
        for path in unpacked.rglob("*"):
            if path.is_file() and (path.name.startswith(("sts-", "SICK")) and path.suffix in {".csv", ".txt"}):
                shutil.copy2(path, folder / path.name)
    return folder


def download_bright(root: str | Path, tasks: tuple[str, ...] = BRIGHT_TASKS, long_documents: bool = False) -> Path:
    """Download BRIGHT tasks from the Hugging Face Hub and write ``root/<task>/{examples,documents}.jsonl``."""
    unknown = set(tasks) - set(BRIGHT_TASKS)
    if unknown:
        raise ValueError(f"unknown BRIGHT task(s) {sorted(unknown)}; known: {', '.join(BRIGHT_TASKS)}")
    check_online(f"https://huggingface.co/datasets/{BRIGHT_REPO}")
    try:
        import pyarrow.parquet as pq
        from huggingface_hub import snapshot_download
    except ImportError as err:
        raise ImportError(f"download_bright needs huggingface_hub and pyarrow: {err}") from None
    doc_dir = "long_documents" if long_documents else "documents"
    patterns = [f"{part}/{task}-*" for task in tasks for part in ("examples", doc_dir)]
    snapshot = Path(snapshot_download(BRIGHT_REPO, repo_type="dataset", allow_patterns=patterns))
    root = Path(root)
    for task in tasks:
        out = root / task
        out.mkdir(parents=True, exist_ok=True)
        for part, file_name in (("examples", "examples.jsonl"), (doc_dir, f"{doc_dir}.jsonl")):
            files = sorted((snapshot / part).glob(f"{task}-*.parquet"))
            if not files:
                raise FileNotFoundError(f"{BRIGHT_REPO}: no {part} parquet files for task {task!r}")
            with open(out / file_name, "w", encoding="utf-8") as handle:
                for file in files:
                    for row in pq.read_table(file).to_pylist():
                        handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    return root
