"""Configs shipped inside the package, so an installed clipmag finds them from any directory.

The default and example configs live in ``clipmag/configs`` (a checkout also shows them as
``configs/``). A config path given by a user is read as is when it exists; otherwise a path
written relative to the configs folder (``configs/text/default.yaml`` or ``text/default.yaml``)
is looked up among the packaged ones.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

PACKAGED_ROOT = "configs"


def packaged_configs() -> Path:
    """The folder of the packaged configs."""
    return Path(str(resources.files("clipmag").joinpath(PACKAGED_ROOT)))


def config_path(path: str | Path) -> Path:
    """``path`` itself when it exists, else the packaged config it names, else ``path`` unchanged
    (so the caller's "not found" message names what the user typed)."""
    path = Path(path)
    if path.exists():
        return path
    parts = path.parts[1:] if path.parts[:1] == (PACKAGED_ROOT,) else path.parts
    packaged = packaged_configs().joinpath(*parts) if parts and not path.is_absolute() else None
    return packaged if packaged is not None and packaged.exists() else path
