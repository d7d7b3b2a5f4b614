"""The manuals' results do not drift from the stored ones: every marked table and number of README.md
and docs/*.md is what ``clipmag-report docs`` renders from ``results/``, and a stored number changed
on a copy makes the check fail, naming the marks it moves."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from clipmag.errors import ConfigError
from clipmag_experiments.manuals.findings_figure import draw, figure_stale
from clipmag_experiments.manuals.sync import (
    BLOCKS,
    VALUES,
    docs_main,
    marks,
    render_text,
    rendered_block,
    stale_marks,
)
from clipmag_experiments.report.stored import StoredResults

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
RESULTS = REPO / "results"


@pytest.fixture(scope="module")
def stored() -> StoredResults:
    """The repository's results, read once for the tests of the manuals."""
    return StoredResults(RESULTS)


def test_every_mark_of_the_manuals_is_what_the_stored_results_give(stored):
    stale = stale_marks(DOCS, stored)
    assert not stale, "re-render with `python scripts/report.py docs`; stale: " + "; ".join(
        f"{m.source} {m.name}" for m in stale
    )


def _stored(name: str, stored: StoredResults) -> bool:
    """Whether the results a table reads are stored (a speed table's record exists once measured)."""
    try:
        rendered_block(name, stored)
    except FileNotFoundError:
        return False
    return True


def test_every_table_renderer_has_its_place_in_the_manuals(stored):
    """Every table whose results are stored is placed; one still awaiting its measurement may wait."""
    used = {m.name for path in DOCS for m in marks(path.read_text(encoding="utf-8"), str(path), stored)}
    unplaced = sorted(name for name in set(BLOCKS) - used if _stored(name, stored))
    assert not unplaced, f"tables rendered nowhere: {unplaced}"
    assert {name.split(":")[0] for name in used} <= set(BLOCKS) | set(VALUES)


MANUAL = """# A manual

<!-- results:hard-negatives -->
<!-- /results:hard-negatives -->

Cosine goes from <!-- value:hn-mean:scifact/cosine -->?<!-- /value --> to
<!-- value:hn-mean:scifact/cosine-mined -->?<!-- /value --> with mined negatives, and the control's
code-search cosine has <!-- value:pr-mean:code-search/minilm/stdlib/cosine -->?<!-- /value -->.

<!-- results:demo-code-search -->
<!-- /results:demo-code-search -->
"""


@pytest.fixture
def copied(tmp_path) -> Path:
    """A results root with the hard-negatives sweep and the positive-regime groups the manual reads."""
    root = tmp_path / "results"
    shutil.copytree(RESULTS / "hard_negatives", root / "hard_negatives")
    for group in ("code-search", "code-search-untuned"):
        shutil.copytree(RESULTS / "positive_regime" / group, root / "positive_regime" / group)
    return root


def _shift_stored_score(cell: Path, dataset: str, by: float) -> None:
    """Change one stored number: the first query's nDCG@10 (and the mean that includes it)."""
    path = cell / "results.json"
    record = json.loads(path.read_text(encoding="utf-8"))
    metrics = record["metrics"][dataset]
    first = next(iter(metrics["per_query"]))
    metrics["per_query"][first]["NDCG@10"] += by
    metrics["NDCG@10"] += by / len(metrics["per_query"])
    path.write_text(json.dumps(record), encoding="utf-8")


def test_a_changed_stored_number_makes_the_check_fail_naming_the_marks_it_moves(copied, tmp_path, capsys):
    manual = tmp_path / "manual.md"
    before = StoredResults(copied)
    manual.write_text(render_text(MANUAL, "manual.md", before), encoding="utf-8")
    assert "| SciFact (in domain) | 60.04 |" in manual.read_text() and "?" not in manual.read_text()
    assert stale_marks([manual], before) == []

    _shift_stored_score(copied / "hard_negatives" / "scifact" / "default" / "cosine" / "seed0", "scifact", 0.9)
    _shift_stored_score(copied / "positive_regime" / "code-search" / "minilm" / "cosine" / "seed1", "stdlib", 0.9)
    assert docs_main(["--files", str(manual), "--results", str(copied), "--check"]) == 1
    out = capsys.readouterr().out
    moved = ("hard-negatives", "hn-mean:scifact/cosine", "demo-code-search", "pr-mean:code-search/minilm/stdlib/cosine")
    for name in moved:
        assert f" {name} is stale" in out
    assert "hn-mean:scifact/cosine-mined is stale" not in out  # an unchanged cell's number still matches
    assert "4 stale marks" in out

    after = StoredResults(copied)
    manual.write_text(render_text(manual.read_text(), "manual.md", after), encoding="utf-8")
    assert stale_marks([manual], after) == []
    assert "| SciFact (in domain) | 60.14 |" in manual.read_text()


def test_a_number_edited_by_hand_is_stale(copied):
    stored = StoredResults(copied)
    text = render_text(MANUAL, "manual.md", stored)
    edited = text.replace("-->60.04<!-- /value -->", "-->60.4<!-- /value -->")
    assert [m.name for m in marks(edited, "manual.md", stored) if m.written != m.rendered] == ["hn-mean:scifact/cosine"]


def test_bad_marks_are_one_line_naming_the_file_and_line(copied):
    stored = StoredResults(copied)
    with pytest.raises(
        ConfigError, match=r"manual.md:3: no results renderer named 'hard-negativs'; known: .*hard-negatives"
    ):
        marks("# m\n\n<!-- results:hard-negativs -->\n<!-- /results:hard-negativs -->\n", "manual.md", stored)
    with pytest.raises(ConfigError, match=r"manual.md:2: <!-- results:hard-negatives --> has no closing mark"):
        marks("# m\n<!-- results:hard-negatives -->\n| a |\n", "manual.md", stored)
    with pytest.raises(ConfigError, match=r"manual.md:1: value:hn-mean:scifact/nothing cannot be rendered"):
        marks("<!-- value:hn-mean:scifact/nothing -->1<!-- /value -->", "manual.md", stored)


def test_the_findings_figure_is_drawn_from_the_comparisons_the_table_counts(stored, tmp_path):
    assert figure_stale(stored, REPO) is None, "redraw it with `python scripts/report.py docs`"
    assert figure_stale(stored, tmp_path).endswith("missing; draw it with clipmag-report docs")
    drawn = draw(stored, tmp_path)
    assert figure_stale(stored, tmp_path) is None
    from PIL import Image

    with Image.open(drawn) as image:
        picture = image.copy()
    picture.save(drawn)  # the same picture without the digest of its values
    assert "drawn from other values" in figure_stale(stored, tmp_path)
