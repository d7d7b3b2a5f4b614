"""Values a config key used to take under another spelling: the old one still works, with one warning.

The offline data sets that install with the project were once called ``embedded`` (``--data
embedded``, ``data.test=[embedded:indomain]``, ``data.source=embedded``); in a library about
embeddings that word read as "embeddings", so they are ``bundled`` now. A config class lists the keys
whose values may still carry an old word in ``RENAMED_VALUES`` (a class attribute: dotted key ->
``{old word: new word}``); a value that is the old word, or starts with ``old:``, is rewritten to
the new one when the config is built (a list value item by item), with one warning line naming both
spellings. So a run given either spelling resolves to the same config, and its identity is the same.

Stored records (a sweep's protocol, results written before the rename) keep the old word; code that
compares a stored config with a new one compares their :func:`current_spelling` instead.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from clipmag.runtime.logs import logger

__all__ = ["BUNDLED_RENAME", "renamed_value", "respelled_tree", "current_spelling"]

BUNDLED_RENAME = {"embedded": "bundled"}
_OLD_WORD = re.compile(r"\b(" + "|".join(map(re.escape, BUNDLED_RENAME)) + r")\b")


def _respell(word: str, renames: Mapping[str, str]) -> str:
    for old, new in renames.items():
        if word == old or word.startswith(old + ":"):
            return new + word[len(old) :]
    return word


def renamed_value(cls: type, key: str, value: Any, source: str) -> Any:
    """``value`` of dotted ``key`` with the old words ``cls`` renamed (``RENAMED_VALUES``) in their new
    spelling, and one warning line naming ``source``, the key and both spellings when one changed."""
    renames = getattr(cls, "RENAMED_VALUES", {}).get(key)
    if not renames:
        return value
    if isinstance(value, str):
        new: Any = _respell(value, renames)
    elif isinstance(value, list):
        new = [_respell(v, renames) if isinstance(v, str) else v for v in value]
    else:
        return value
    if new != value:
        logger.warning(
            "%s: %s=%s is the old spelling, it is now %s=%s (the old one still works for now)",
            source,
            key,
            value,
            key,
            new,
        )
    return new


def respelled_tree(cls: type, data: dict[str, Any], source: str) -> dict[str, Any]:
    """A YAML mapping with the values of the keys ``cls`` lists in ``RENAMED_VALUES`` respelled."""
    for key in getattr(cls, "RENAMED_VALUES", {}):
        *parents, leaf = key.split(".")
        node: Any = data
        for part in parents:
            node = node.get(part) if isinstance(node, Mapping) else None
        if isinstance(node, dict) and leaf in node:
            node[leaf] = renamed_value(cls, key, node[leaf], source)
    return data


def current_spelling(tree: Any) -> Any:
    """A copy of a JSON-like ``tree`` (a stored config, a sweep's argument lists) with every renamed
    word in its new spelling, for comparing a stored record with a new one: the two spellings of
    one setting compare equal (only the renamed word is rewritten, wherever it stands)."""
    if isinstance(tree, str):
        return _OLD_WORD.sub(lambda m: BUNDLED_RENAME[m.group(1)], tree)
    if isinstance(tree, Mapping):
        return {key: current_spelling(value) for key, value in tree.items()}
    if isinstance(tree, (list, tuple)):
        return [current_spelling(value) for value in tree]
    return tree
