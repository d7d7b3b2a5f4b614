"""A sweep's preparation steps: the data builders and models its groups read, run before them.

Each step is a module's ``main(args)`` run in this process, skipped when the file it ``creates``
exists (so a rerun goes straight to the cells) and skipped with a line when a path it ``requires``
is absent (an optional data set never stops the rest of a sweep).

Every step is checked before the first runs, from its source alone: its module is a ``.py`` file
(or a package's ``__init__.py``) of this environment, not Python's own, found on the import path by
looking at folders, and the last top-level binding of ``main`` in it is a ``def``. Nothing is
imported to check it, so a package's ``__init__.py`` does not run before a step is refused; a
standard-library module (``math``), a folder without ``__init__.py`` and ``main = None`` are refused
as such.

A step that trains a start (a continued or pretrained encoder) names its weights in ``fingerprint``:
a sweep run over sittings rebuilds such a step on a fresh machine, and the sha256 of each named file
is recorded with every start so that cells trained from one rebuild are never mixed with cells
trained from another (:func:`clipmag_experiments.design.protocol.record_prepared`).

A sitting that runs only some of a sweep's cells (``--only``) prepares only what those cells read
(:func:`steps_read_by`): a start rebuilt on another class of CPU need not be rebuilt, and fingerprinted
anew, by a sitting that trains none of its cells.
"""

from __future__ import annotations

import ast
import importlib
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from clipmag.errors import ConfigError
from clipmag.runtime.logs import caller_logging_kept, logger
from clipmag.storage.files import sha256_of

__all__ = ["SweepStep", "check_prepare", "fingerprints", "run_prepare", "missing_paths", "steps_read_by"]


@dataclass
class SweepStep:
    """A preparation step: ``module``'s ``main(args)`` (an importable module of this environment), run
    unless ``creates`` exists; skipped with a line when a path in ``requires`` is absent. The files
    in ``fingerprint`` (a trained start's weights) must be byte for byte the same at every start."""

    name: str
    module: str
    args: list[str] = field(default_factory=list)
    creates: str | None = None
    requires: list[str] = field(default_factory=list)
    fingerprint: list[str] = field(default_factory=list)


def missing_paths(paths: Sequence[str]) -> list[str]:
    return [p for p in paths if not Path(p).exists()]


def _main_binding(tree: ast.Module) -> ast.stmt | None:
    """The last statement of a module's top level that binds ``main`` (a ``def``, an import, an
    assignment), which is what ``module.main`` is once the module has run; None when none does."""
    last = None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [alias.asname or alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
            names = [node.target.id]
        else:
            names = []
        last = node if "main" in names else last
    return last


def _search_folders() -> list[Path]:
    """The folders of the import path, in its order."""
    folders = [Path(entry or ".").resolve() for entry in sys.path]
    return [folder for folder in dict.fromkeys(folders) if folder.is_dir()]


def _source_file(module: str) -> Path | str:
    """The ``.py`` file of ``module`` (a module, or a package's ``__init__.py``) found as the import
    system finds it, but by looking at folders only, so no package's ``__init__`` runs; or what
    keeps it from being one."""
    parts = module.split(".")
    if not all(part.isidentifier() for part in parts):
        return f"{module!r} is not a module name (dotted Python names, e.g. text_retrieval.data.shards_cli)"
    if parts[0] in sys.stdlib_module_names:
        return f"module {module!r} is Python's own (its standard library), not a preparation step with a main(args)"
    namespace = None  # a folder without __init__.py: what import finds only when no file is found
    for folder in _search_folders():
        package = folder.joinpath(*parts[:-1])
        if not all((folder.joinpath(*parts[: n + 1]) / "__init__.py").is_file() for n in range(len(parts) - 1)):
            continue
        for candidate in (package / f"{parts[-1]}.py", package / parts[-1] / "__init__.py"):
            if candidate.is_file():
                return candidate
        if namespace is None and (package / parts[-1]).is_dir():
            namespace = f"module {module!r} is a folder without __init__.py ({package / parts[-1]}), which has no main"
    return namespace or f"module {module!r} is not importable in this environment (no {'/'.join(parts)}.py found)"


def _step_problem(step: SweepStep) -> str | None:
    """What keeps ``step`` from running, found from its source without running any code (not even
    its parent packages'): no ``.py`` file, or no function ``main`` at its top level."""
    source = _source_file(step.module)
    if isinstance(source, str):
        return source
    try:
        tree = ast.parse(source.read_text(encoding="utf-8"), str(source))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError) as err:
        return f"module {step.module!r} ({source}) cannot be read ({err})"
    binding = _main_binding(tree)
    if not isinstance(binding, (ast.FunctionDef, ast.AsyncFunctionDef)):
        found = "" if binding is None else f" (main at line {binding.lineno} is not a def)"
        return f"module {step.module!r} ({source}) has no main(args) to call{found}"
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


def _names_path(word: str, folder: str) -> bool:
    """Whether a command-line word names ``folder`` or a path inside it (``data.test=[a/b, c]`` names
    ``a/b`` and ``a``; ``a/bc`` names neither ``a/b`` nor ``a/bc/..``'s sibling ``a/b``)."""
    return re.search(rf"(?<![\w./-]){re.escape(folder)}(?![\w.-])", word) is not None


def _with_config_text(words: Sequence[str]) -> list[str]:
    """``words``, each once, and the text of each YAML config file among them: a run reads the paths
    its ``--config`` names as surely as those on its command line (every cell of a sweep names the
    same few, so each is read once)."""
    unique = list(dict.fromkeys(words))
    configs = [Path(word) for word in unique if word.endswith((".yaml", ".yml")) and Path(word).is_file()]
    return [*unique, *(path.read_text(encoding="utf-8") for path in configs)]


def steps_read_by(steps: Sequence[SweepStep], words: Sequence[str]) -> list[SweepStep]:
    """The steps whose output some command-line word in ``words`` names (a cell's arguments and its
    evaluations'), with the earlier steps those steps read in turn, in the sweep's order. A step's
    output is the folder holding the file it ``creates``; a step without ``creates`` is always kept,
    as nothing says what it makes. The YAML configs the words name are read as words too."""
    read = _with_config_text(words)
    kept = set()
    for index in reversed(range(len(steps))):  # a step reads only what an earlier step made
        step = steps[index]
        folder = Path(step.creates).parent.as_posix() if step.creates else None
        if folder is None or any(_names_path(word, folder) for word in read):
            kept.add(index)
            read += _with_config_text(step.args)
    return [step for index, step in enumerate(steps) if index in kept]


def fingerprints(steps: Sequence[SweepStep]) -> dict[str, dict[str, str]]:
    """Per step, the sha256 of each of its ``fingerprint`` files that exists (a step skipped for an
    absent input has none)."""
    found = {}
    for step in steps:
        digests = {path: sha256_of(path) for path in step.fingerprint if Path(path).is_file()}
        if digests:
            found[step.name] = digests
    return found
