"""Evaluation data: BEIR and BRIGHT retrieval sets, STS pairs, files of (query, document) pairs, and a
detector that tells them apart.

``load_eval_datasets(path)`` is what the command line and the trainer's evaluation use: it looks at
a path, decides whether it is a BEIR folder, a BRIGHT task folder (or a folder of them), a pairs
file (:mod:`text_retrieval.data.loaders.pairs`), STS data, or a BRIGHT settings file (see
:mod:`text_retrieval.data.loaders.eval_settings`), and loads it. A settings file named as a packaged
config (``configs/eval/bright_official.yaml``) is found from any directory, as every config is.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Literal

from clipmag.registry.config_packages import config_path
from text_retrieval.data.loaders.beir import RetrievalDataset, is_beir_folder, load_beir, read_qrels
from text_retrieval.data.loaders.bright import BrightDataset, is_bright_folder, load_bright, load_bright_collection
from text_retrieval.data.loaders.eval_settings import (
    SETTINGS_SUFFIXES,
    EvalSettings,
    is_settings_file,
    read_settings_file,
)
from text_retrieval.data.loaders.pairs import is_pairs_file, pairs_retrieval_set
from text_retrieval.data.loaders.reading import DataFormatError
from text_retrieval.data.loaders.sts import STSPairs, is_sts_path, load_sts, load_sts_file

__all__ = [
    "BrightDataset",
    "DataFormatError",
    "EvalSettings",
    "RetrievalDataset",
    "STSPairs",
    "detect_kind",
    "load_eval_datasets",
    "load_beir",
    "load_bright",
    "load_sts",
    "load_sts_file",
    "located",
    "read_qrels",
]

# The STS sets text_retrieval.data.fetch downloads into this layout (its STS_SOURCES; a test keeps
# the two equal: the fetcher imports these loaders, so they cannot import it back).
FETCHED_STS = ("stsbenchmark", "sickr")

DatasetKind = Literal["beir", "bright", "bright-collection", "bright-settings", "pairs", "sts"]


def located(path: str | Path) -> Path:
    """``path``, or, for a settings file absent there, the packaged config it names (``configs/eval/...``)."""
    path = Path(path)
    return config_path(path) if not path.exists() and path.suffix in SETTINGS_SUFFIXES else path


def fetch_hint(path: Path) -> str:
    """The command that fetches missing evaluation data: exactly, for a BEIR set under ``.../beir/NAME``
    or a known STS set under ``.../sts/NAME`` (the layout the downloader writes), else its usage."""
    command = "python -m text_retrieval.data.download"
    kind = path.parent.name
    if kind == "beir" or (kind == "sts" and path.name in FETCHED_STS):
        return f"fetch it with: {command} {kind} {path.name} {path.parent}"
    return f"a BEIR or STS set is fetched with: {command} beir|sts NAME ROOT (see {command} --help)"


def detect_kind(path: str | Path) -> DatasetKind:
    """Which kind of evaluation data lives at ``path``; a clear error listing the layouts otherwise."""
    path = located(path)
    if not path.exists():
        raise FileNotFoundError(f"evaluation data not found: {path}; {fetch_hint(path)}")
    if is_beir_folder(path):
        return "beir"
    if is_bright_folder(path):
        return "bright"
    if path.is_dir() and any(is_bright_folder(p) for p in path.iterdir() if p.is_dir()):
        return "bright-collection"
    if is_settings_file(path):
        return "bright-settings"
    if is_pairs_file(path):
        return "pairs"
    if is_sts_path(path):
        return "sts"
    raise ValueError(
        f"{path}: not a recognised evaluation dataset. Expected a BEIR folder (corpus.jsonl[.gz], "
        "queries.jsonl, qrels/<split>.tsv), a BRIGHT task folder (examples.jsonl, documents.jsonl) or a "
        "folder of them, a BRIGHT settings file (.yaml), a file of (query, document) pairs (.jsonl, or .tsv of "
        "two fields a line), or STS data (a .csv/.tsv/.txt file of scored pairs, or a folder of them)"
    )


def _load_bright(path: Path, settings: EvalSettings, attach: bool) -> list[BrightDataset]:
    """A task folder or a root of them in ``settings``' setting; ``attach`` makes the settings travel
    with each dataset (a settings file's datasets are then evaluated with them wherever they go)."""
    options = (settings.long_documents, settings.reasoning, bool(settings.strict))
    if is_bright_folder(path):
        datasets = [load_bright(path, *options)]
    else:
        datasets = load_bright_collection(path, *options)
    if not attach:
        return datasets
    suffix = f"@{settings.name}" if settings.name else ""
    return [dataclasses.replace(ds, name=ds.name + suffix, settings=settings) for ds in datasets]


def load_eval_datasets(
    path: str | Path, split: str = "test", settings: EvalSettings | None = None
) -> list[RetrievalDataset | STSPairs]:
    """Load every dataset found at ``path`` (one for BEIR, one per task or file otherwise).

    ``settings`` choose the BRIGHT setting (long documents, reasoning queries) and the strictness;
    a settings file brings its own and ignores these.
    """
    path = located(path)
    settings = settings or EvalSettings()
    kind = detect_kind(path)
    if kind == "beir":
        return [load_beir(path, split=split, strict=settings.strict is not False)]
    if kind in ("bright", "bright-collection"):
        return list(_load_bright(path, settings, attach=False))
    if kind == "bright-settings":
        root, own = read_settings_file(path)
        return list(_load_bright(root, own, attach=True))
    if kind == "pairs":
        return [pairs_retrieval_set(path)]
    return list(load_sts(path, split=split))
