"""Pinned PyPI wheels as source text: the pin file, the download of exactly the pinned file (checked
by sha256) and its ``.py`` files unpacked, for the PyPI pair set (:mod:`text_retrieval.data.bundled.pypi_pairs`).

A pin names a distribution, its version, the wheel file pip fetches for CPython 3.11 on manylinux
x86_64, its sha256, and the split its whole package goes to. Nothing is installed: only the source
files are read, so a wheel with compiled parts serves as well as a pure-Python one.
"""

from __future__ import annotations

import hashlib
import json
import logging
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from clipmag.errors import UserError

logger = logging.getLogger("clipmag")

__all__ = ["MORE_TRAIN_PINS_FILE", "PINS_FILE", "SPLITS", "Pin", "fetch_wheel", "read_pins", "unpack_sources"]

PINS_FILE = Path(__file__).with_name("pypi_pins.json")
# training packages only, read after every other pin: a larger training set with the same dev and test sets
MORE_TRAIN_PINS_FILE = Path(__file__).with_name("pypi_pins_more_train.json")
SPLITS = ("dev", "test", "train")  # in reading order: a code copy in two packages stays in the evaluation split
# one wheel per pin whatever machine builds the set: the interpreter and platform the pins name
PIP_TARGET = ["--platform", "manylinux_2_17_x86_64", "--python-version", "3.11", "--implementation", "cp"]
PIP_TARGET += ["--abi", "cp311", "--only-binary", ":all:", "--no-deps"]


@dataclass(frozen=True)
class Pin:
    """One wheel: its distribution ``name`` and ``version``, the ``file`` pip fetches, its ``sha256``
    and the ``split`` the whole package goes to."""

    name: str
    version: str
    file: str
    sha256: str
    split: str


def read_pins(path: str | Path = PINS_FILE) -> list[Pin]:
    """The pins of ``path``; a malformed entry is one error naming the file and the entry."""
    path = Path(path)
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))["packages"]
        pins = [Pin(**entry) for entry in entries]
    except (OSError, KeyError, TypeError, json.JSONDecodeError) as err:
        raise UserError(
            f"{path}: expected {{'packages': [{{name, version, file, sha256, split}}, ...]}} ({err})"
        ) from None
    for pin in pins:
        if pin.split not in SPLITS:
            raise UserError(f"{path}: package {pin.name} has split {pin.split!r}; expected one of {', '.join(SPLITS)}")
    names = [pin.name for pin in pins]
    if len(set(names)) != len(names):
        raise UserError(
            f"{path}: a package is pinned twice ({', '.join(sorted({n for n in names if names.count(n) > 1}))})"
        )
    return pins


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch_wheel(pin: Pin, cache: Path) -> Path:
    """The pinned wheel in ``cache``, downloaded when absent; a sha256 other than the pin's is refused."""
    path = cache / pin.file
    if not path.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        logger.info("downloading %s==%s", pin.name, pin.version)
        cmd = [sys.executable, "-m", "pip", "download", *PIP_TARGET, "--dest", str(cache), f"{pin.name}=={pin.version}"]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0 or not path.is_file():
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise UserError(f"pip download {pin.name}=={pin.version} did not give {pin.file}: {last}")
    actual = _sha256(path)
    if actual != pin.sha256:
        raise UserError(f"{path}: sha256 {actual} is not the pinned {pin.sha256}; delete the file and build again")
    return path


def unpack_sources(wheel: Path, into: Path) -> Path:
    """The ``.py`` files of ``wheel`` under ``into`` (written once; the wheel's sha256 names the folder)."""
    done = into / ".unpacked"
    if not done.is_file():
        with zipfile.ZipFile(wheel) as archive:
            for member in sorted(archive.namelist()):
                if member.endswith(".py") and ".." not in Path(member).parts and not member.startswith("/"):
                    target = into / member
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(archive.read(member))
        into.mkdir(parents=True, exist_ok=True)  # a wheel without source files is read as empty
        done.write_text(wheel.name + "\n")
    return into
