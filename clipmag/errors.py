"""The errors a user can fix, in the bottom room every other module may import: every console
script ends on one of them in one line (:mod:`clipmag.config.entry`), never a traceback."""

from __future__ import annotations

__all__ = ["UserError", "ConfigError"]


class UserError(Exception):
    """An error its message lets the user fix (it names the key, file or setting): every console
    script ends on one with that message in one line (:mod:`clipmag.config.entry`), not a traceback."""


class ConfigError(UserError, ValueError):
    """A configuration key or value that does not fit the schema."""
