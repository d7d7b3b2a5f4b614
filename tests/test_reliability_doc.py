"""Every guarantee of docs/reliability.md names a test that exists: ``tests/FILE.py::test_name``."""

from __future__ import annotations

import ast
import re

from conftest import REPO

PAGE = REPO / "docs" / "reliability.md"
NAMED = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")


def test_every_named_test_exists():
    named = NAMED.findall(PAGE.read_text(encoding="utf-8"))
    assert len(named) >= 6
    missing = []
    for file, name in named:
        path = REPO / file
        tree = ast.parse(path.read_text(encoding="utf-8")) if path.is_file() else ast.Module(body=[])
        if name not in {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}:
            missing.append(f"{file}::{name}")
    assert not missing
