"""The registry of trainers ("front ends") that sweeps and tools launch by name.

Each entry names a module with ``main(argv)`` (and, to be checked before a sweep starts,
``parse_args(argv)``, which raises on a bad argument list and runs nothing); the same module runs
under ``torchrun -m``, so a launcher never needs a script path and an installed clipmag works from
any directory. Front ends register themselves through :mod:`clipmag.registry.plugins` (clipmag's ``text``
and ``clip`` do so too), so the core names none; a project of its own
calls ``register_front_end("mine", "my_pkg.cli")``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from clipmag.registry.plugins import check_arguments, load_plugins


@dataclass(frozen=True)
class FrontEnd:
    """A trainer: ``module.main(argv)`` trains one run; ``python -m module`` does the same."""

    name: str
    module: str

    @property
    def main(self) -> Callable[[Sequence[str]], Any]:
        return importlib.import_module(self.module).main

    def check(self, argv: Sequence[str]) -> Any:
        """Parse ``argv`` with the module's ``parse_args`` (its config's own checks) without running
        anything, so a sweep finds a bad cell before the first one trains; a module without
        ``parse_args`` is checked when its cell starts. Returns the resolved config (None without)."""
        return check_arguments(self.module, argv)


FRONT_ENDS: dict[str, FrontEnd] = {}


def register_front_end(name: str, module: str) -> FrontEnd:
    FRONT_ENDS[name] = FrontEnd(name, module)
    return FRONT_ENDS[name]


def get_front_end(name: str) -> FrontEnd:
    if name not in FRONT_ENDS:
        raise ValueError(f"unknown front end {name!r}; valid: {', '.join(FRONT_ENDS)}")
    return FRONT_ENDS[name]


load_plugins()  # the front ends register themselves (clipmag.plugins)
