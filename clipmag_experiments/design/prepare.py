"""A sweep's preparation steps: the data builders and models its groups read, run before them.

Each step is a module's ``main(args)`` run in this process, skipped when the file it ``creates``
exists (so a rerun goes straight to the cells) and skipped with a line when a path it ``requires``
is absent (an optional data set never stops the rest of a sweep).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from clipmag.runtime.logs import caller_logging_kept, logger

__all__ = ["SweepStep", "run_prepare", "missing_paths"]


@dataclass
class SweepStep:
    """A preparation step: ``module``'s ``main(args)`` (an importable module of this environment), run
    unless ``creates`` exists; skipped with a line when a path in ``requires`` is absent."""

    name: str
    module: str
    args: list[str] = field(default_factory=list)
    creates: str | None = None
    requires: list[str] = field(default_factory=list)


def missing_paths(paths: Sequence[str]) -> list[str]:
    return [p for p in paths if not Path(p).exists()]


def run_prepare(steps: Sequence[SweepStep]) -> None:
    """Run each preparation step whose output is missing (skipping those whose inputs are absent)."""
    for step in steps:
        absent = missing_paths(step.requires)
        if absent:
            logger.warning("prepare %s: skipped, %s not found", step.name, ", ".join(absent))
        elif step.creates and Path(step.creates).exists():
            logger.info("prepare %s: %s exists, skipped", step.name, step.creates)
        else:
            logger.info("prepare %s: python -m %s %s", step.name, step.module, " ".join(step.args))
            with caller_logging_kept():  # the step's main sets up logging of its own
                status = importlib.import_module(step.module).main(list(step.args))
            if isinstance(status, int) and status != 0:  # a main that returns an exit status
                raise RuntimeError(f"prepare step {step.name!r} ({step.module}) failed with status {status}")
