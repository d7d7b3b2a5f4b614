"""A sweep's preparation steps: the data builders and models its groups read, run before them.

Each step is a module's ``main(args)`` run in this process, skipped when the file it ``creates``
exists (so a rerun goes straight to the cells) and skipped with a line when a path it ``requires``
is absent (an optional data set never stops the rest of a sweep).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from clipmag.errors import ConfigError
from clipmag.runtime.logs import caller_logging_kept, logger

__all__ = ["SweepStep", "check_prepare", "run_prepare", "missing_paths"]


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


def _defines_main(tree: ast.Module) -> bool:
    """Whether a module's top level binds ``main``: a function, an import or an assignment."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "main":
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if any((alias.asname or alias.name.split(".")[0]) == "main" for alias in node.names):
                return True
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if any(isinstance(t, ast.Name) and t.id == "main" for t in targets):
            return True
    return False


def _step_problem(step: SweepStep) -> str | None:
    """What keeps ``step`` from running, found without running its module's code (its parent
    packages are imported to find it): not importable, or no ``main`` at its top level."""
    try:
        spec = importlib.util.find_spec(step.module)
    except (ImportError, ValueError) as err:
        return f"module {step.module!r} cannot be found ({err})"
    if spec is None:
        return f"module {step.module!r} is not importable in this environment"
    if spec.origin is None or not spec.origin.endswith(".py"):
        return None  # compiled or namespace: checked when it runs
    try:
        tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"), spec.origin)
    except (OSError, SyntaxError, UnicodeDecodeError) as err:
        return f"module {step.module!r} ({spec.origin}) cannot be read ({err})"
    if not _defines_main(tree):
        return f"module {step.module!r} ({spec.origin}) has no main(args) to call"
    return None


def check_prepare(steps: Sequence[SweepStep], source: str = "sweep") -> None:
    """Refuse, before any step runs, a sweep whose prepare steps are not all runnable, naming each."""
    problems = [f"prepare step {step.name!r}: {problem}" for step in steps if (problem := _step_problem(step))]
    if problems:
        raise ConfigError(f"{source}: {'; '.join(problems)}; a prepare step names a module with a main(args)")


def run_prepare(steps: Sequence[SweepStep]) -> None:
    """Run each preparation step whose output is missing (skipping those whose inputs are absent),
    every step checked first."""
    check_prepare(steps)
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
