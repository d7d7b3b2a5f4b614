"""The core names no front end: front ends and evaluations join through the clipmag.plugins entry
points, and no core module imports or names text_retrieval or image_text."""

from __future__ import annotations

import re
from pathlib import Path

from clipmag.registry.evaluations import EVALUATIONS
from clipmag.registry.front_ends import FRONT_ENDS

CORE = Path(__file__).resolve().parents[1] / "clipmag"


def test_front_ends_and_evaluations_arrive_through_the_plugins():
    assert {"text", "clip"} <= set(FRONT_ENDS) and FRONT_ENDS["text"].module == "text_retrieval.cli"
    assert {"rag", "predict"} <= set(EVALUATIONS) and EVALUATIONS["rag"].front_ends == ("text",)


def test_no_core_module_names_a_front_end():
    offenders = []
    for path in sorted(CORE.rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"\btext_retrieval\b|\bimage_text\b", line):
                offenders.append(f"{path.relative_to(CORE.parent)}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_nothing_below_imports_the_experiments():
    """Sweeps, reports and dry runs (``clipmag_experiments``) orchestrate both front ends from above:
    neither the core nor a front end may import them."""
    offenders = []
    for root in (CORE, CORE.parent / "text_retrieval", CORE.parent / "image_text"):
        for path in sorted(root.rglob("*.py")):
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if re.match(r"\s*(from|import)\s+clipmag_experiments\b", line):
                    offenders.append(f"{path.relative_to(CORE.parent)}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


# The experiments' modules that import a front end directly, as docs/architecture.md names them (their
# subject is that front end's own data); everything else reaches a front end through the registry.
DIRECT_FRONT_END_IMPORTS = {
    "clipmag_experiments/dry_run/paper.py",
    "clipmag_experiments/dry_run/standin_models.py",
    "clipmag_experiments/dry_run/standin_test_sets.py",
    "clipmag_experiments/sweep/caption_layout.py",
}


def test_the_experiments_import_a_front_end_only_where_the_contract_page_says():
    root = CORE.parent
    importing = {
        str(path.relative_to(root))
        for path in sorted((root / "clipmag_experiments").rglob("*.py"))
        if re.search(r"^\s*(from|import)\s+(text_retrieval|image_text)\b", path.read_text(encoding="utf-8"), re.M)
    }
    assert importing == DIRECT_FRONT_END_IMPORTS, (
        "a module of clipmag_experiments imports a front end directly: reach it through the registry, or "
        f"name it here and in docs/architecture.md: {sorted(importing ^ DIRECT_FRONT_END_IMPORTS)}"
    )
    page = (root / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert all(Path(name).name in page for name in DIRECT_FRONT_END_IMPORTS)
