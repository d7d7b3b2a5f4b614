"""Configs shipped inside the packages, so an installed clipmag finds them from any directory.

The core ships none: it names no front end, and every config names one. Each package above it
keeps its configs in its own ``configs`` folder and registers it (``register_config_package``): a
front end from its plugin (the text front end's ``text/``, ``rag/``, ``eval/``, the image-text
front end's ``clip/``), the sweeps' package (``clipmag_experiments``: ``sweeps/``) when imported.
A checkout shows them together as ``configs/``. A config path given by a user is read as is when it
exists; otherwise a path written relative to the configs folder (``configs/text/default.yaml`` or
``text/default.yaml``) is looked up in every registered package, in the order they registered.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from clipmag.registry.plugins import load_plugins

__all__ = ["PACKAGED_ROOT", "packaged_configs", "register_config_package", "config_path"]

PACKAGED_ROOT = "configs"
_CONFIG_PACKAGES: list[str] = []


def packaged_configs(package: str) -> Path:
    """The folder of a package's packaged configs."""
    return Path(str(resources.files(package).joinpath(PACKAGED_ROOT)))


def register_config_package(package: str) -> None:
    """Let ``config_path`` find the configs that ``package`` ships in its ``configs`` folder."""
    if package not in _CONFIG_PACKAGES:
        _CONFIG_PACKAGES.append(package)


def config_path(path: str | Path) -> Path:
    """``path`` itself when it exists, else the packaged config it names, else ``path`` unchanged
    (so the caller's "not found" message names what the user typed)."""
    path = Path(path)
    if path.exists():
        return path
    parts = path.parts[1:] if path.parts[:1] == (PACKAGED_ROOT,) else path.parts
    if not parts or path.is_absolute():
        return path
    load_plugins()  # the front ends register their config folders
    for package in _CONFIG_PACKAGES:
        packaged = packaged_configs(package).joinpath(*parts)
        if packaged.exists():
            return packaged
    return path
