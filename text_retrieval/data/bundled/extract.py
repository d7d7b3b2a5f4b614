"""Docstring-summary -> code pairs extracted from an installed Python source tree.

Code search is the bundled default's retrieval task because its text installs with Python itself
(the standard library) and with our dependencies (scikit-learn), so a fresh machine can build it
offline, and because code documents vary in length and content much more than their one-line
queries - a setting where document magnitude can carry signal.

One ``CodeFunction`` per function or method (functions nested inside functions are skipped): the
query is the first sentence of the docstring's first paragraph, the document is the function's
source (decorators included) with the docstring lines removed, dedented. Files are read in sorted
order, so the result depends only on the files on disk.
"""

from __future__ import annotations

import ast
import importlib.util
import logging
import re
import textwrap
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger("clipmag")

# Directory names that hold tests, demos or vendored third-party code rather than the library.
EXCLUDED_DIRS = frozenset({"test", "tests", "idle_test", "testing", "turtledemo", "externals", "_vendor", "vendored"})
MIN_QUERY_WORDS = 4
MAX_QUERY_WORDS = 48
MIN_CODE_LINES = 3  # non-blank lines including the ``def`` line; fewer is a trivial accessor
MAX_CODE_LINES = 80
MAX_CODE_CHARS = 4000

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(`'\"])")
_SIGNATURE_LIKE = re.compile(r"^[\w.]+\s*\(.*\)\s*(->|$)")
_TRIVIAL_BODY = ("pass", "...", "raise NotImplementedError", "raise NotImplementedError()")


@dataclass(frozen=True)
class CodeFunction:
    """One function: where it lives, its query (``None`` when unusable) and its code document."""

    module: str  # top-level module or package, the unit of the train/test split
    path: str  # path relative to the source root, POSIX style
    qualname: str
    lineno: int
    summary: str | None
    code: str

    @property
    def doc_id(self) -> str:
        return f"{self.path}:{self.qualname}"


def installed_package_dir(name: str, needed_by: str) -> Path:
    """The source folder of the installed top-level package ``name``, or an error saying who needs it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"{needed_by} needs the installed package {name!r} (pip install it)")
    return Path(list(spec.submodule_search_locations)[0])


def iter_source_files(root: Path, exclude_top: frozenset[str] = frozenset()) -> list[Path]:
    """Library ``.py`` files under ``root``, sorted, without tests, vendored code or non-packages.

    Directories whose names are not identifiers (``site-packages``, ``config-3.11-...``) cannot
    be imported and are skipped, as are top-level entries named in ``exclude_top``.
    """
    files = []
    for path in root.rglob("*.py"):
        rel = path.relative_to(root)
        dirs = rel.parts[:-1]
        if rel.parts[0].removesuffix(".py") in exclude_top:
            continue
        if any(not d.isidentifier() or d in EXCLUDED_DIRS for d in dirs):
            continue
        if rel.stem.startswith("test_") or rel.stem == "conftest":
            continue
        files.append(path)
    return sorted(files, key=lambda p: p.relative_to(root).as_posix())


def summarize_docstring(doc: str) -> str | None:
    """First sentence of the first paragraph, on one line; ``None`` when it is not a usable query."""
    paragraph = doc.strip().split("\n\n", 1)[0]
    text = " ".join(paragraph.split())
    if not text or _SIGNATURE_LIKE.match(text):
        return None
    sentence = _SENTENCE_END.split(text, maxsplit=1)[0].strip()
    words = sentence.split()
    if not MIN_QUERY_WORDS <= len(words) <= MAX_QUERY_WORDS:
        return None
    if sum(any(c.isalpha() for c in w) for w in words) < MIN_QUERY_WORDS - 1:
        return None
    return sentence


def _code_without_docstring(node: ast.AST, lines: list[str]) -> str | None:
    """The function's source lines minus its docstring; ``None`` if they cannot be separated."""
    start = min([node.lineno] + [d.lineno for d in node.decorator_list])
    body = node.body
    drop: set[int] = set()
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
        doc = body[0]
        if not isinstance(doc.value.value, str):
            return None
        if doc.lineno == node.lineno or (len(body) > 1 and body[1].lineno <= doc.end_lineno):
            return None  # docstring shares a line with code
        drop = set(range(doc.lineno, doc.end_lineno + 1))
        # Blank lines right after the docstring only separated it from the code.
        nxt = doc.end_lineno + 1
        while nxt <= node.end_lineno and not lines[nxt - 1].strip():
            drop.add(nxt)
            nxt += 1
    kept = [lines[i - 1].rstrip() for i in range(start, node.end_lineno + 1) if i not in drop]
    return textwrap.dedent("\n".join(kept)).strip("\n")


def _is_trivial(code: str) -> bool:
    meaningful = [ln for ln in code.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    if len(meaningful) < MIN_CODE_LINES or len(meaningful) > MAX_CODE_LINES:
        return True
    if len(code) > MAX_CODE_CHARS:
        return True
    body = [ln.strip() for ln in meaningful if not ln.lstrip().startswith(("def ", "async def ", "@"))]
    return all(ln in _TRIVIAL_BODY for ln in body)


def _walk_functions(tree: ast.Module) -> Iterator[tuple[str, ast.AST]]:
    """(qualname, node) for module-level functions and methods of (nested) classes."""
    stack: list[tuple[str, ast.AST]] = [("", tree)]
    while stack:
        prefix, parent = stack.pop(0)
        for child in ast.iter_child_nodes(parent):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield prefix + child.name, child
            elif isinstance(child, ast.ClassDef):
                stack.append((prefix + child.name + ".", child))
            elif isinstance(child, (ast.If, ast.Try)) and parent is tree:
                # Platform-dependent definitions (``if sys.platform == ...: def f``).
                stack.append((prefix, child))


def extract_file(path: Path, root: Path, prefix: str = "") -> list[CodeFunction]:
    """All non-trivial functions of one file; unreadable or unparsable files give none.

    Ids and modules come from the path relative to ``root``; ``prefix`` (e.g. ``"sklearn/"``) is
    put before the path in ids only.
    """
    rel = path.relative_to(root).as_posix()
    try:
        with tokenize.open(path) as fh:
            source = fh.read()
        tree = ast.parse(source, filename=rel)
    except (SyntaxError, UnicodeDecodeError, ValueError, OSError) as exc:
        logger.debug("skipping %s: %s", rel, exc)
        return []
    lines = source.splitlines()
    module = rel.split("/", 1)[0].removesuffix(".py")
    out = []
    for qualname, node in _walk_functions(tree):
        if node.name.startswith("__") and node.name.endswith("__") and node.name != "__init__":
            continue
        code = _code_without_docstring(node, lines)
        if code is None or _is_trivial(code):
            continue
        doc = ast.get_docstring(node, clean=True)
        summary = summarize_docstring(doc) if doc else None
        out.append(CodeFunction(module, prefix + rel, qualname, node.lineno, summary, code))
    return out


def extract_functions(root: Path, exclude_top: frozenset[str] = frozenset(), prefix: str = "") -> list[CodeFunction]:
    """Every usable function under ``root``, deduplicated.

    A document whose code (whitespace-normalised) already occurred is dropped, so a copy of a
    function cannot sit on both sides of a split. A summary shared by two or more functions is
    ambiguous as a query and is cleared on all of them (they stay as documents).
    """
    functions: list[CodeFunction] = []
    seen_code: set[str] = set()
    for path in iter_source_files(root, exclude_top):
        for fn in extract_file(path, root, prefix):
            key = " ".join(fn.code.split())
            if key in seen_code:
                continue
            seen_code.add(key)
            functions.append(fn)
    counts: dict[str, int] = {}
    for fn in functions:
        if fn.summary:
            norm = fn.summary.casefold()
            counts[norm] = counts.get(norm, 0) + 1
    result = []
    ids: set[str] = set()
    for fn in functions:
        if fn.summary and counts[fn.summary.casefold()] > 1:
            fn = CodeFunction(fn.module, fn.path, fn.qualname, fn.lineno, None, fn.code)
        if fn.doc_id in ids:  # the same name defined twice in one file
            fn = CodeFunction(fn.module, fn.path, f"{fn.qualname}@{fn.lineno}", fn.lineno, fn.summary, fn.code)
        ids.add(fn.doc_id)
        result.append(fn)
    logger.debug("%s: %d functions, %d with a usable summary", root, len(result), sum(bool(f.summary) for f in result))
    return result
