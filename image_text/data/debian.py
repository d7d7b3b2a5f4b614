"""Pinned Debian packages as data files: fetched, checked, unpacked into a cache, never installed.

A data set built from packages must be the same on every machine, so each package is pinned by
version and by the sha256 of its ``.deb`` (``debian_pins.json`` beside this module). A package is
fetched with ``apt-get download NAME=VERSION`` (the machine's Debian mirrors; no root, nothing
installed), its hash checked, and unpacked with Python's own ``ar`` and ``tar`` readers into
``<cache>/<name>_<version>/``, so neither ``dpkg`` nor a system-wide install is needed. A finished
unpack is marked, and a second build reads it from the cache without fetching.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from clipmag.errors import UserError

PINS = Path(__file__).with_name("debian_pins.json")
DONE_MARK = ".unpacked"


class PackageUnavailable(UserError):
    """A pinned package that cannot be fetched here (no apt-get, no mirror, no such version)."""


@dataclass(frozen=True)
class DebPin:
    """One package at one version, and the sha256 its ``.deb`` must have."""

    name: str
    version: str
    file: str
    sha256: str


def load_pins(path: Path = PINS) -> dict[str, DebPin]:
    """The pinned packages by name."""
    packages = json.loads(path.read_text(encoding="utf-8"))["packages"]
    return {name: DebPin(name, p["version"], p["file"], p["sha256"]) for name, p in packages.items()}


def default_cache() -> Path:
    """``$XDG_CACHE_HOME/clipmag/debian`` (``~/.cache/clipmag/debian``): shared by every build."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "clipmag" / "debian"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fetch(pin: DebPin, cache: Path) -> Path:
    """``apt-get download`` of the pinned version into ``cache``; one clear line when it cannot."""
    by_hand = f"or put {pin.file} (sha256 {pin.sha256}) into {cache} by hand"
    if shutil.which("apt-get") is None:
        raise PackageUnavailable(f"{pin.name}: fetching it needs Debian's apt-get; run this on Debian {by_hand}")
    done = subprocess.run(
        ["apt-get", "download", f"{pin.name}={pin.version}"], cwd=cache, capture_output=True, text=True
    )
    deb = cache / pin.file
    if done.returncode != 0 or not deb.is_file():
        said = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise PackageUnavailable(
            f"apt-get download {pin.name}={pin.version} failed ({said}); check the machine's Debian sources "
            f"(apt-get update) {by_hand}"
        )
    return deb


def _ar_members(deb: Path) -> dict[str, tuple[int, int]]:
    """The members of an ``ar`` archive (what a .deb is): name -> (offset, size)."""
    members, data = {}, deb.read_bytes()
    if not data.startswith(b"!<arch>\n"):
        raise UserError(f"{deb}: not a Debian package (no ar header); delete it and build again")
    offset = 8
    while offset + 60 <= len(data):
        header = data[offset : offset + 60]
        name, size = header[:16].decode().strip().rstrip("/"), int(header[48:58].decode().strip())
        members[name] = (offset + 60, size)
        offset += 60 + size + (size % 2)
    return members


def _unpack(deb: Path, target: Path) -> None:
    """The package's file tree (its ``data.tar.*``) into ``target``; only plain files and folders."""
    members = _ar_members(deb)
    name = next((m for m in members if m.startswith("data.tar")), None)
    if name is None:
        raise UserError(f"{deb}: holds no data.tar member; delete it and build again")
    start, size = members[name]
    with open(deb, "rb") as f:
        f.seek(start)
        payload = f.read(size)
    with tarfile.open(fileobj=io.BytesIO(payload)) as tar:
        tar.extractall(target, members=[m for m in tar.getmembers() if m.isfile() or m.isdir()], filter="data")


def unpacked(pin: DebPin, cache: Path | None = None) -> Path:
    """The folder holding ``pin``'s files (``usr/share/...``), fetched and unpacked on first use."""
    cache = Path(cache) if cache is not None else default_cache()
    target = cache / f"{pin.name}_{pin.version}"
    if (target / DONE_MARK).is_file():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    deb = cache / pin.file
    if not deb.is_file() or _sha256(deb) != pin.sha256:
        deb = _fetch(pin, cache)
    found = _sha256(deb)
    if found != pin.sha256:
        deb.unlink()
        raise UserError(
            f"{pin.file}: sha256 {found}, pinned {pin.sha256} (image_text/data/debian_pins.json); removed it"
        )
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    _unpack(deb, partial)
    (partial / DONE_MARK).write_text(pin.sha256 + "\n")
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)
    return target
