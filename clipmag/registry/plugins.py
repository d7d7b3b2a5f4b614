"""How front ends and evaluations join the core without the core naming them.

A package registers its trainers (:mod:`clipmag.registry.front_ends`) and sweep evaluations
(:mod:`clipmag.registry.evaluations`) from a function published under the entry-point group
``clipmag.plugins`` (``PLUGIN_GROUP``); both registries load every such function once, when they
are first imported.
clipmag's own two front ends use the same door (see ``pyproject.toml``); a project of its own adds

    [project.entry-points."clipmag.plugins"]
    mine = "my_package.plugin:register"

A registration function must stay cheap: it names modules, which are imported only when used.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from importlib.metadata import entry_points
from typing import Any

__all__ = ["PLUGIN_GROUP", "check_arguments", "load_plugins"]

PLUGIN_GROUP = "clipmag.plugins"
_loaded = False


def load_plugins() -> None:
    """Call every registered plugin's function, once per process."""
    global _loaded
    if _loaded:
        return
    _loaded = True  # first: a plugin imports the registries, which call this again
    for entry in entry_points(group=PLUGIN_GROUP):
        try:
            register = entry.load()
        except ImportError as err:
            raise ImportError(f"clipmag plugin {entry.name!r} ({entry.value}) cannot be imported: {err}") from err
        register()


def check_arguments(module: str, argv: Sequence[str]) -> Any:
    """Parse ``argv`` with ``module.parse_args`` (a plugin module's optional checker), running nothing:
    a sweep finds a bad argument list before its first cell trains. Returns the resolved config, or
    None for a module without one (checked when it runs)."""
    parse = getattr(importlib.import_module(module), "parse_args", None)
    return None if parse is None else parse(list(argv))
