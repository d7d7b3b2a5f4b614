"""Every download of the project: one streamed, atomic fetch, a fast offline check, unpacking.

A download goes to a temporary sibling that replaces the target only when complete
(:func:`clipmag.storage.files.replace_on_success`), so an interrupted fetch is never mistaken for a
finished one, and a target already there is kept. :func:`check_online` tries a short connection
first, so an offline machine gets an immediate error naming the URL and how to place the file by
hand, not a long hang in a retry loop. The front ends' dataset fetchers are built on these.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import tarfile
import urllib.request
import zipfile
from pathlib import Path
from urllib.parse import urlparse

from tqdm.auto import tqdm

from clipmag.storage.files import replace_on_success

logger = logging.getLogger("clipmag")

__all__ = ["check_online", "download", "fetch_online", "unpack"]


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


def download(url: str, target: str | Path, timeout: float = 60.0) -> Path:
    """``url`` to ``target`` (kept if already there), streamed with a progress bar, atomically.
    Unreachable: a ``FileNotFoundError`` naming the URL, the file and what to do offline."""
    target = Path(target)
    if target.is_file():
        return target
    logger.info("fetching %s", url)
    try:
        with replace_on_success(target) as tmp, urllib.request.urlopen(url, timeout=timeout) as response:
            size = int(response.headers.get("Content-Length") or 0) or None
            with open(tmp, "wb") as out, tqdm.wrapattr(out, "write", total=size, desc=target.name, unit="B") as sink:
                shutil.copyfileobj(response, sink, 1 << 20)
    except OSError as err:  # URLError, timeouts and refused connections are OSErrors
        raise FileNotFoundError(
            f"{target} is missing and {url} cannot be fetched ({err}); fetch it on a machine with internet "
            "and put it there"
        ) from None
    return target


def fetch_online(url: str, target: str | Path, hint: str) -> Path:
    """``url`` to ``target`` unless it is there; offline, the one-line error of :func:`check_online`."""
    target = Path(target)
    if not target.is_file():
        check_online(url, hint=hint)
        download(url, target)
    return target


def unpack(archive: Path, into: Path) -> None:
    """Unpack a zip or tar archive into ``into`` (tar members are filtered as data: no links out)."""
    if archive.suffix == ".zip":
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(into)
    else:
        with tarfile.open(archive) as tf:
            tf.extractall(into, filter="data")
