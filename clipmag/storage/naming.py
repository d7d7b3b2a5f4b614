"""File-name-safe names for run folders, result files and caches, made one way everywhere."""

from __future__ import annotations

import re

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def slug(text: str, fallback: str = "x") -> str:
    """``text`` with every run of unsafe characters replaced by ``_`` (``fallback`` if nothing is left)."""
    return _UNSAFE.sub("_", text).strip("_") or fallback
