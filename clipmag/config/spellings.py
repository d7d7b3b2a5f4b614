"""Keys, flags and values a config used to spell another way: the old spelling still works, with one
warning line naming the old and the new.

The offline data sets that install with the project were once called ``embedded`` (``--data
embedded``, ``data.test=[embedded:indomain]``, ``data.embedded.root``, ``--embedded``); in a library
about embeddings that word read as "embeddings", so they are ``bundled`` now. A config class lists
what it renamed in class attributes:

* ``RENAMED_KEYS``: old dotted key -> new one. A key renames everything under it, so a renamed
  section (``{"data.embedded": "data.bundled"}``) takes ``data.embedded.root=x`` on the command line
  and ``data: {embedded: {root: x}}`` in a YAML file to ``data.bundled.root``.
* ``RENAMED_FLAGS``: old flag -> new flag (``--embedded-train`` -> ``--bundled-train``), read by
  :mod:`clipmag.config.command_line`; the old flags are not listed in ``--help``.
* ``RENAMED_VALUES``: dotted key -> ``{old word: new word}``; a value that is the old word, or starts
  with ``old:``, is rewritten to the new one (a list value item by item); an old word ``None`` takes
  a ``null`` value to the new word (``model.pretrained=null`` is ``model.init=random``).
* ``LISTED_KEYS``: dotted keys that took one value and take a list now (the image-text trainer's
  ``data.validation`` / ``data.test``, lists as in the text trainer); one value given is a list of
  one, and ``null`` (no set) the empty list.

The two trainers once spelled one setting two ways (the text trainer's ``model.name_or_path`` and
``data.objective``, the image-text trainer's ``data.train_shards``, ...); :data:`TRAINER_KEYS` and
:data:`TRAINER_FLAGS` list the old spellings of both with the one name each has now, and both
trainers' config classes read every one of them, so an old spelling of either trainer names the
key in the other too.

So a run given either spelling resolves to the same config, and its identity is the same. Stored
records (a sweep's protocol, results written before the rename) keep the old words; code that
compares a stored config with a new one compares their :func:`current_spelling` instead.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from clipmag.errors import ConfigError
from clipmag.runtime.logs import logger

__all__ = [
    "BUNDLED_RENAME",
    "TRAINER_KEYS",
    "TRAINER_FLAGS",
    "current_key",
    "current_flag",
    "renamed_keys_tree",
    "renamed_value",
    "respelled_tree",
    "current_spelling",
]

BUNDLED_RENAME = {"embedded": "bundled"}
# The old word as a whole word or a part of a name (``embedded_seed``, ``--embedded-train``).
_OLD_WORD = re.compile(r"(?<![A-Za-z0-9])(" + "|".join(map(re.escape, BUNDLED_RENAME)) + r")(?![A-Za-z0-9])")

# One name per setting in both trainers: each old spelling (of either trainer) -> the key both use.
TRAINER_KEYS = {
    "model.name_or_path": "model.name",
    "data.objective": "objective",
    "data.train_shards": "data.train",
    "data.val_shards": "data.validation",
    "data.test_shards": "data.test",
    "data.num_workers": "data.workers",
    "data.allow_corrupt_shards": "data.skip_corrupt",
    "data.skip_broken_images": "data.skip_corrupt",
    "data.bundled.n_train": "data.bundled.train",
    "data.bundled.n_dev": "data.bundled.validation",
    "data.bundled.val": "data.bundled.validation",
    "data.bundled_seed": "data.bundled.seed",
    "data.bundled.n_test": "data.bundled.test",
    "model.pretrained": "model.init",
}
# The flags of the renamed data keys (``_`` for ``-``), old -> new.
TRAINER_FLAGS = {"train_shards": "train", "val_shards": "validation", "test_shards": "test", "pretrained": "init"}
# An old trainer key as a ``key=value`` word, and an old flag as a whole word.
_OLD_KEY = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, TRAINER_KEYS)) + r")(?==)")
_OLD_FLAG = {f"--{old.replace('_', '-')}": f"--{new.replace('_', '-')}" for old, new in TRAINER_FLAGS.items()}


def current_key(cls: type, key: str, source: str) -> str:
    """The name dotted ``key`` has now: with the part ``cls`` renamed (``RENAMED_KEYS``: the key itself
    or a section above it) in its new name, and one warning line naming ``source`` and both names;
    else ``key`` itself. A key renamed twice (``data.embedded.n_train``: its section, then itself)
    takes both renames."""
    for old, new in getattr(cls, "RENAMED_KEYS", {}).items():
        if key == old or key.startswith(old + "."):
            renamed = new + key[len(old) :]
            logger.warning(
                "%s: key '%s' is deprecated, it is now '%s' (the old name still works for now)", source, key, renamed
            )
            return current_key(cls, renamed, source)
    return key


def current_flag(cls: type, flag: str) -> str | None:
    """The flag (``_`` for ``-``) that ``cls`` renamed ``flag`` to (``RENAMED_FLAGS``), with one warning
    line naming both; None when ``flag`` is not an old one."""
    new = getattr(cls, "RENAMED_FLAGS", {}).get(flag)
    if new is not None:
        old_flag, new_flag = (f"--{name.replace('_', '-')}" for name in (flag, new))
        logger.warning(
            "command line: flag %s is deprecated, it is now %s (the old name still works for now)", old_flag, new_flag
        )
    return new


def _parent(tree: dict[str, Any], dotted: str, create: bool = False) -> tuple[dict[str, Any] | None, str]:
    """The mapping of ``tree`` that holds the last part of ``dotted`` (made where ``create``), and that part."""
    *parents, leaf = dotted.split(".")
    node: Any = tree
    for part in parents:
        if create and isinstance(node, dict) and part not in node:
            node[part] = {}
        node = node.get(part) if isinstance(node, dict) else None
    return (node if isinstance(node, dict) else None), leaf


def _joined(moved: Any, present: Any, old: str, new: str, source: str) -> dict[str, Any]:
    """A renamed section given under both names, joined when the two hold different keys; else an
    error naming the first key given twice."""
    both = sorted(set(moved) & set(present)) if isinstance(moved, dict) and isinstance(present, dict) else [""]
    if both:
        tail = f".{both[0]}" if both[0] else ""
        old_key, new_key = old + tail, new + tail
        raise ConfigError(
            f"{source}: keys '{old_key}' and '{new_key}' both given ('{old_key}' is the old name); keep '{new_key}'"
        )
    return {**present, **moved}


def renamed_keys_tree(cls: type, data: dict[str, Any], source: str) -> dict[str, Any]:
    """A YAML mapping read from ``source`` with the keys ``cls`` renamed (``RENAMED_KEYS``) moved to their
    new names, a renamed section with all it holds (joined with the new section where both are given;
    one key under both names is refused, naming it)."""
    for old, new in getattr(cls, "RENAMED_KEYS", {}).items():
        parent, leaf = _parent(data, old)
        if parent is None or leaf not in parent:
            continue
        current_key(cls, old, source)
        moved = parent.pop(leaf)
        target, new_leaf = _parent(data, new, create=True)
        if target is None:
            raise ConfigError(f"{source}: key '{old}' is the old name of '{new}', whose section is not a mapping")
        if new_leaf in target:
            moved = _joined(moved, target[new_leaf], old, new, source)
        target[new_leaf] = moved
    return data


def _respell(word: str, renames: Mapping[str | None, str]) -> str:
    for old, new in renames.items():
        if old is not None and (word == old or word.startswith(old + ":")):
            return new + word[len(old) :]
    return word


def renamed_value(cls: type, key: str, value: Any, source: str) -> Any:
    """``value`` of dotted ``key`` with the old words ``cls`` renamed (``RENAMED_VALUES``) in their new
    spelling, and one warning line naming ``source``, the key and both spellings when one changed."""
    if key in getattr(cls, "LISTED_KEYS", ()) and (value is None or isinstance(value, str)):
        listed = [] if value is None else [value]
        logger.warning(
            "%s: %s takes a list now, and %s is %s=[%s] (the old form still works for now)",
            source,
            key,
            "one value" if listed else "null (no set)",
            key,
            value or "",
        )
        return listed
    renames = getattr(cls, "RENAMED_VALUES", {}).get(key)
    if not renames:
        return value
    if value is None and None in renames:
        new: Any = renames[None]
    elif isinstance(value, str):
        new = _respell(value, renames)
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
    """A YAML mapping with the values of the keys ``cls`` lists in ``RENAMED_VALUES`` respelled, and
    one value of a key in ``LISTED_KEYS`` as a list of one."""
    for key in [*getattr(cls, "RENAMED_VALUES", {}), *getattr(cls, "LISTED_KEYS", ())]:
        *parents, leaf = key.split(".")
        node: Any = data
        for part in parents:
            node = node.get(part) if isinstance(node, Mapping) else None
        if isinstance(node, dict) and leaf in node:
            node[leaf] = renamed_value(cls, key, node[leaf], source)
    return data


def current_spelling(tree: Any) -> Any:
    """A copy of a JSON-like ``tree`` (a stored config, a sweep's argument lists) with every renamed
    word in its new spelling, in keys and values, for comparing a stored record with a new one: the
    two spellings of one setting compare equal (only the renamed word is rewritten, wherever it
    stands: ``data.embedded_seed=1`` reads ``data.bundled_seed=1``), and every old trainer key given
    as ``key=value`` or flag given as a word in the name both trainers use (``data.objective=sts``
    reads ``objective=sts``, ``--train-shards`` reads ``--train``)."""
    if isinstance(tree, str):
        word = _OLD_WORD.sub(lambda m: BUNDLED_RENAME[m.group(1)], tree)
        flag, equals, value = word.partition("=")
        if flag in _OLD_FLAG:
            return _OLD_FLAG[flag] + equals + value
        return _OLD_KEY.sub(lambda m: TRAINER_KEYS[m.group(1)], word)
    if isinstance(tree, Mapping):
        return {current_spelling(key): current_spelling(value) for key, value in tree.items()}
    if isinstance(tree, (list, tuple)):
        return [current_spelling(value) for value in tree]
    return tree
