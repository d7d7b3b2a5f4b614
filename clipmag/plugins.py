"""How front ends and evaluations join the core without the core naming them.

A package registers its trainers (:mod:`clipmag.frontends`) and sweep evaluations
(:mod:`clipmag.evaluations`) from a function published under the entry-point group
``clipmag.plugins``; both registries load every such function once, when they are first imported.
clipmag's own two front ends use the same door (see ``pyproject.toml``); a project of its own adds

    [project.entry-points."clipmag.plugins"]
    mine = "my_package.plugin:register"

A registration function must stay cheap: it names modules, which are imported only when used.
"""

from __future__ import annotations

from importlib.metadata import entry_points

__all__ = ["PLUGIN_GROUP", "load_plugins"]

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
