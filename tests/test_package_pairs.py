"""The stage-1 pair builder keeps held-out trees out: by name, and by any copy of their code or summaries."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from text_retrieval.data.bundled.package_pairs import build_package_pairs
from text_retrieval.data.training.shards import TextShardStream

HELD_OUT = '''
def alpha_value(thing):
    """Compute the alpha value of a thing for the report."""
    total = 0
    for part in thing:
        total += part
    return total
'''

PACKAGE = '''
def alpha_value(thing):
    """Compute the alpha value of a thing for the report."""
    total = 0
    for part in thing:
        total += part
    return total


def merge_sorted_lists(left, right):
    """Merge two sorted lists into one sorted list quickly."""
    out = []
    while left and right:
        out.append(left.pop(0) if left[0] < right[0] else right.pop(0))
    return out + left + right


def count_words_in_text(text):
    """Count the words of a text split on white space."""
    words = text.split()
    n = len(words)
    return n
'''


OTHER = '''
def other_alpha(thing):
    """Compute the alpha value of a thing for the report."""
    values = list(thing)
    values.sort()
    return values[0]
'''


def _tree(root: Path, name: str, source: str) -> Path:
    package = root / name
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "core.py").write_text(textwrap.dedent(source))
    return package


@pytest.fixture
def trees(tmp_path):
    return _tree(tmp_path / "held", "heldlib", HELD_OUT), _tree(tmp_path / "site", "pkg", PACKAGE)


def test_copies_of_held_out_code_or_summaries_are_dropped(tmp_path, trees):
    held, package = trees
    other = _tree(tmp_path / "site", "other", OTHER)  # new code under a held-out summary
    paths = build_package_pairs(
        tmp_path / "out", ["pkg", "other"], held_out={"heldlib": held}, package_dirs={"pkg": package, "other": other}
    )
    pairs = [json.loads(line) for line in paths["pairs"].read_text().splitlines()]
    assert sorted(p["doc_id"] for p in pairs) == ["pkg/core.py:count_words_in_text", "pkg/core.py:merge_sorted_lists"]
    manifest = json.loads(paths["manifest"].read_text())
    assert manifest["per_package"]["pkg"] == {"functions": 3, "held_out_copies": 1, "kept": 2, "ambiguous": 0}
    assert manifest["per_package"]["other"] == {"functions": 1, "held_out_copies": 1, "kept": 0, "ambiguous": 0}
    assert manifest["pairs"] == 2 and len(manifest["sha256_pairs"]) == 64
    assert manifest["key"]["held_out"] == {"heldlib": str(held)}
    assert TextShardStream(paths["shards"], 1).num_samples == 2


def test_a_held_out_tree_cannot_be_a_source(tmp_path, trees):
    held, package = trees
    with pytest.raises(ValueError, match="heldlib is held out"):
        build_package_pairs(tmp_path / "out", ["pkg", "heldlib"], held_out={"heldlib": held}, package_dirs={})


def test_rebuild_only_when_settings_change(tmp_path, trees):
    held, package = trees
    kwargs = dict(held_out={"heldlib": held}, package_dirs={"pkg": package})
    paths = build_package_pairs(tmp_path / "out", ["pkg"], **kwargs)
    stamp = paths["pairs"].stat().st_mtime_ns
    build_package_pairs(tmp_path / "out", ["pkg"], **kwargs)
    assert paths["pairs"].stat().st_mtime_ns == stamp
    build_package_pairs(tmp_path / "out", ["pkg"], max_pairs=1, **kwargs)
    assert len(paths["pairs"].read_text().splitlines()) == 1
    with pytest.raises(ValueError, match="max_pairs must be at least 1"):
        build_package_pairs(tmp_path / "out", ["pkg"], max_pairs=0, **kwargs)
