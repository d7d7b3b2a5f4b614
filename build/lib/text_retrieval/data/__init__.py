"""Evaluation data: BEIR and BRIGHT retrieval sets, STS pairs, and a detector that tells them apart.

``load_eval_datasets(path)`` is what the command line uses: it looks at a path, decides whether it
is a BEIR folder, a BRIGHT task folder (or a folder of them), or STS data, and loads it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from text_retrieval.data.beir import RetrievalDataset, is_beir_folder, load_beir, read_qrels
from text_retrieval.data.bright import is_bright_folder, load_bright
from text_retrieval.data.common import DataFormatError
from text_retrieval.data.sts import STSPairs, is_sts_path, load_sts, load_sts_file

__all__ = [
    "DataFormatError", "RetrievalDataset", "STSPairs", "detect_kind", "load_eval_datasets",
    "load_beir", "load_bright", "load_sts", "load_sts_file", "read_qrels",
]

DatasetKind = Literal["beir", "bright", "bright-collection", "sts"]


def detect_kind(path: str | Path) -> DatasetKind:
    """Which kind of evaluation data lives at ``path``; a clear error listing the layouts otherwise."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"evaluation data not found: {path}")
    if is_beir_folder(path):
        return "beir"
    if is_bright_folder(path):
        return "bright"
    if path.is_dir() and any(is_bright_folder(p) for p in path.iterdir() if p.is_dir()):
        return "bright-collection"
    if is_sts_path(path):
        return "sts"
    raise ValueError(
        f"{path}: not a recognised evaluation dataset. Expected a BEIR folder (corpus.jsonl[.gz], "
        "queries.jsonl, qrels/<split>.tsv), a BRIGHT task folder (examples.jsonl, documents.jsonl) or a "
        "folder of them, or STS data (a .csv/.tsv/.txt file of scored pairs, or a folder of them)"
    )


def load_eval_datasets(path: str | Path, split: str = "test", strict: bool = True) -> list[RetrievalDataset | STSPairs]:
    """Load every dataset found at ``path`` (one for BEIR, one per task or file otherwise)."""
    path = Path(path)
    kind = detect_kind(path)
    if kind == "beir":
        return [load_beir(path, split=split, strict=strict)]
    if kind == "bright":
        return [load_bright(path, strict=strict)]
    if kind == "bright-collection":
        return [load_bright(p, strict=strict) for p in sorted(path.iterdir()) if is_bright_folder(p)]
    return list(load_sts(path, split=split))
