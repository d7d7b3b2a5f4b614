"""Fetching public archives: a fast offline check, unpacking, and the BEIR mirror.

Shared by the evaluation-set downloads (:mod:`text_retrieval.data.download`) and the training-set
builders (:mod:`text_retrieval.data.training_download`). Network access is checked first with a short
connection attempt, so an offline machine gets an immediate error naming the URL and what to do
instead of a long hang in a retry loop.
"""

from __future__ import annotations

import logging
import os
import socket
import tarfile
import tempfile
import zipfile
from pathlib import Path
from urllib.parse import urlparse

from clipmag.files import download

__all__ = ["BEIR_URL", "check_online", "unpack", "download_beir"]

logger = logging.getLogger("clipmag")

BEIR_URL = "https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets/{name}.zip"


def check_online(url: str, timeout: float = 5.0, hint: str | None = None) -> None:
    """Raise ``ConnectionError`` at once when ``url``'s host cannot be reached: one line naming the
    URL and ``hint``, how to place the files by hand (default: unpack them into the target folder)."""
    hint = hint or "fetch it on a connected machine and unpack it into the target folder"
    if os.environ.get("HF_HUB_OFFLINE") == "1" and "huggingface.co" in url:
        raise ConnectionError(f"HF_HUB_OFFLINE=1 is set, so the Hugging Face hub cannot be reached for {url}; {hint}")
    host = urlparse(url).hostname or url
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
    except OSError as err:
        raise ConnectionError(
            f"cannot reach {host} ({err}): this machine looks offline, so {url} cannot be fetched; {hint}"
        ) from None


def unpack(archive: Path, into: Path) -> None:
    if archive.suffix == ".zip":
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(into)
    else:
        with tarfile.open(archive) as tf:
            tf.extractall(into, filter="data")


def download_beir(name: str, root: str | Path, hint: str | None = None) -> Path:
    """Download and unpack BEIR dataset ``name`` (e.g. ``scifact``) into ``root/name``; ``hint``: what
    the offline error suggests instead."""
    root = Path(root)
    folder = root / name
    if (folder / "qrels").is_dir():
        logger.info("%s already present", folder)
        return folder
    with tempfile.TemporaryDirectory(dir=root if root.exists() else None) as tmp:
        url = BEIR_URL.format(name=name)
        check_online(url, hint=hint)
        archive = download(url, Path(tmp) / f"{name}.zip")
        unpack(archive, root)
    return folder
