"""What a run recorded before a setting existed ran with, so that repeating or continuing it stays
the same run.

A key whose default is not what runs did before it existed makes every older config, checkpoint and
results record ambiguous: ``train.fast_dropout`` (default true) draws dropout masks from raw random
bits, and every run recorded before the key drew torch's. Such a record ran with
``train.fast_dropout=false``, so whatever repeats or continues it - a resume, a sweep cell that
continues a stored checkpoint (``continue_from``), ``clipmag-rerun-cell`` - runs with that value,
while a new run takes the default. ``PREDATING_VALUES`` lists these keys with the value a run from
before each of them had.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["NEW_RUN_VALUES", "PREDATING_VALUES", "recorded_settings", "recorded_overrides", "with_predating_values"]

PREDATING_VALUES: dict[str, Any] = {"train.fast_dropout": False}
# what a new run takes for each of those keys left unset (``None`` in the config)
NEW_RUN_VALUES: dict[str, Any] = {"train.fast_dropout": True}


def _lookup(config: Mapping[str, Any], dotted: str) -> tuple[bool, Any]:
    """(whether ``config`` holds the dotted key, its value)."""
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False, None
        node = node[part]
    return True, node


def recorded_settings(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """Each key of ``PREDATING_VALUES`` as the saved config (``to_dict`` of a run's config, e.g. a
    results record's ``provenance.config``) ran with it: its own value, or the value of a run from
    before the key when it lacks it. A record without a config predates them all."""
    settings = {}
    for key, old in PREDATING_VALUES.items():
        held, value = _lookup(config or {}, key)
        settings[key] = value if held else old
    return settings


def recorded_overrides(config: Mapping[str, Any] | None) -> list[str]:
    """:func:`recorded_settings` as ``key=value`` tokens for a command line (``train.fast_dropout=false``)."""
    return [f"{key}={json.dumps(value)}" for key, value in recorded_settings(config).items()]


def with_predating_values(identity: Mapping[str, Any]) -> dict[str, Any]:
    """A checkpoint's step identity (dotted keys) with the keys it predates set to what it ran with."""
    return {**PREDATING_VALUES, **identity}
