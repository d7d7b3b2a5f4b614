"""The packages import in one direction: no file and no folder imports, directly or through others, one
that imports it back. The graph is read from the source (every ``import`` statement, at the top of a
module or inside a function alike: a deferred import is an arrow all the same), so a circle shows here
before it shows as a half-initialised module at run time.

Folders are checked as rooms within rooms: inside every folder, its files and sub-folders (each taken
whole) must import one another without a circle."""

from __future__ import annotations

import ast
import collections
from collections.abc import Iterable, Mapping
from pathlib import Path

from conftest import REPO

PACKAGES = ("clipmag", "clipmag_experiments", "text_retrieval", "image_text")


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for package in PACKAGES for p in sorted((REPO / package).rglob("*.py"))}


def _imported_names(module: str, path: Path) -> Iterable[str]:
    """Every dotted name an import statement of the file reaches for; ``from a import b`` yields
    ``a.b``, which is the module ``a.b`` if there is one and otherwise a name defined in ``a``."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package[: len(package) - node.level + 1], *([base] if base else [])])
            yield from (f"{base}.{alias.name}" for alias in node.names)


def _project_module(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _file_arrows() -> dict[str, set[str]]:
    arrows = collections.defaultdict(set)
    for module, path in MODULES.items():
        for name in _imported_names(module, path):
            target = _project_module(name)
            if target and target != module:
                arrows[module].add(target)
    return arrows


def _circles(arrows: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of more than one node (Tarjan's algorithm, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []
    for root in sorted(set(arrows) | {t for targets in arrows.values() for t in targets}):
        if root in index:
            continue
        work = [(root, iter(sorted(arrows.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    part = []
                    while not part or part[-1] != node:
                        part.append(stack.pop())
                        on_stack.discard(part[-1])
                    if len(part) > 1:
                        circles.append(sorted(part))
            elif target not in index:
                index[target] = low[target] = len(index)
                stack.append(target)
                on_stack.add(target)
                work.append((target, iter(sorted(arrows.get(target, ())))))
            elif target in on_stack:
                low[node] = min(low[node], index[target])
    return circles


def _describe(circles: list[list[str]], why: Mapping[tuple[str, str], list[str]]) -> str:
    lines = []
    for circle in circles:
        lines.append("circle: " + ", ".join(circle))
        lines += [f"  {a} -> {b}: {', '.join(why[a, b])}" for a in circle for b in circle if why.get((a, b))]
    return "\n".join(lines)


def test_no_file_imports_itself_through_others():
    arrows = _file_arrows()
    why = {(a, b): [b] for a, targets in arrows.items() for b in targets}
    circles = _circles(arrows)
    assert not circles, _describe(circles, why)


def test_no_folder_imports_itself_through_others():
    """Inside each folder, an arrow between two of its files runs between those files; an arrow from
    ``a/x.py`` to ``b/y.py`` runs between the sub-folders ``a`` and ``b`` of their nearest common folder."""
    arrows = collections.defaultdict(set)
    why = collections.defaultdict(list)
    for source, targets in _file_arrows().items():
        for target in targets:
            a, b = MODULES[source].relative_to(REPO).parts, MODULES[target].relative_to(REPO).parts
            common = next(i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y)
            rooms = "/".join(a[: common + 1]), "/".join(b[: common + 1])
            arrows[rooms[0]].add(rooms[1])
            why[rooms].append(f"{source} -> {target}")
    circles = _circles(arrows)
    assert not circles, _describe(circles, why)


def test_the_graph_sees_deferred_and_relative_imports(tmp_path):
    """The reader itself: an import inside a function and a relative import are arrows too."""
    source = tmp_path / "sweep.py"
    source.write_text("from . import plan\nfrom ..report.build import rows\n\n\ndef later():\n    import torch\n")
    names = set(_imported_names("clipmag_experiments.sweep.run", source))
    assert names == {"clipmag_experiments.sweep.plan", "clipmag_experiments.report.build.rows", "torch"}
    assert _project_module("clipmag_experiments.report.build.rows") == "clipmag_experiments.report.build"
