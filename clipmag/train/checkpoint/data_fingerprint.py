"""What a run trained on, as one string a checkpoint keeps, so a resume notices data that changed.

``--resume latest`` after the shards were rebuilt with other pairs would train on silently: the
steps, the seed and the schedule all match, only the data is another. Every checkpoint therefore
stores the fingerprint of ``data.train`` (both trainers spell the key alike), and a resume compares
it with the data it is given (:func:`check_same_data`): a change is one line, unless the user says
to go on (``train.resume_other_data=true``).

The fingerprint of a file (a pairs or STS file) is its sha256. Shards can be hundreds of gigabytes,
read once per epoch, so a run start does not hash them whole: their fingerprint is a sha256 over
each shard's name, byte size and first 64 KiB (a rebuild with other pairs, or another shuffle, starts
every shard with other samples), and over the ``sizes.json`` beside them. Bundled data (built from
the code and its seed) and remote shards have none, and are not compared.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from clipmag.runtime.logs import logger
from clipmag.storage.files import sha256_of
from clipmag.storage.shards import SIZES_FILE, ShardError, expand_shards

__all__ = ["FINGERPRINT_KEY", "training_data_fingerprint", "check_same_data", "DataChanged"]

FINGERPRINT_KEY = "data_fingerprint"  # the checkpoint's key
HEAD_BYTES = 64 * 1024  # what is read of each shard


class DataChanged(ValueError):
    """The checkpoint to resume trained on other data than the run is given."""


def _shard_files(train: str) -> list[Path]:
    """The local shard files ``train`` names (a folder of ``*.tar``, or a pattern); none for remote
    urls or a name that is no shard set."""
    folder = Path(train)
    if folder.is_dir():
        return sorted(folder.glob("*.tar"))
    try:
        return [Path(url) for url in expand_shards(train) if Path(url).is_file()]
    except ShardError:
        return []


def training_data_fingerprint(train: Any) -> str | None:
    """The fingerprint of the training data ``train`` (``data.train``) names; None when it names no
    local file or shards (bundled data, remote shards)."""
    if not isinstance(train, str) or not train:
        return None
    if Path(train).is_file():
        return f"file sha256 {sha256_of(train)}"
    shards = _shard_files(train)
    if not shards:
        return None
    digest = hashlib.sha256()
    for folder in sorted({shard.parent for shard in shards}):
        if (folder / SIZES_FILE).is_file():
            digest.update((folder / SIZES_FILE).read_bytes())
    for shard in shards:
        with open(shard, "rb") as fh:
            head = fh.read(HEAD_BYTES)
        digest.update(f"{shard.name}\0{shard.stat().st_size}\0".encode() + head)
    return f"{len(shards)} shards {digest.hexdigest()}"


def check_same_data(
    ckpt: Mapping[str, Any], path: str | Path, fingerprint: str | None, train: Any, go_on: bool
) -> None:
    """Refuse, in one line, to resume checkpoint ``ckpt`` (read from ``path``) on training data whose
    ``fingerprint`` differs from the one it stored; with ``go_on``, one warning instead. A checkpoint
    from before fingerprints, or data without one, is not compared."""
    saved = ckpt.get(FINGERPRINT_KEY)
    if saved is None or fingerprint is None or saved == fingerprint:
        return
    what = f"the training data {train} is not what {path} trained on ({saved} there, {fingerprint} here)"
    if go_on:
        logger.warning("%s; resuming on it, as train.resume_other_data=true says", what)
        return
    raise DataChanged(
        f"cannot resume: {what}; resume on the data it trained on, or add train.resume_other_data=true to go on "
        "with this data"
    )
