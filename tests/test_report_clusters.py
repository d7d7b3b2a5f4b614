"""CLIP's text -> image queries are grouped by the image they search for, derived from the stored
test set's layout (each image's captions in a row), so the tests take the image as the unit."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from clipmag.errors import ConfigError
from clipmag.results.marks import family_mark, verdict
from clipmag.results.significance import holm
from clipmag_experiments.manuals import clip
from clipmag_experiments.report.collect import caption_clusters, find_cells
from clipmag_experiments.report.stored import StoredResults

STORED = Path(__file__).resolve().parents[1] / "results" / "clip_losses" / "infonce-sym" / "default" / "dot" / "seed0"


@pytest.fixture
def stored_cell(tmp_path) -> Path:
    """One stored CLIP sweep cell (1,000 test images, 5,000 captions), copied."""
    cell = tmp_path / "runs" / "infonce-sym" / "default" / "dot" / "seed0"
    shutil.copytree(STORED, cell)
    return cell


def test_each_caption_belongs_to_the_image_its_row_falls_in(stored_cell):
    ((key, clusters),) = caption_clusters(find_cells(stored_cell.parents[3])).items()
    assert key == ("infonce-sym", "default", "digits")
    assert len(clusters) == 5000 and len(set(clusters.values())) == 1000
    assert clusters["text-0"] == clusters["text-4"] == "captions of image-0" != clusters["text-5"]
    assert clusters["text-4999"] == "captions of image-999"
    assert not any(q.startswith(("image-", "zeroshot-")) for q in clusters)  # those are their own units


def test_a_test_set_without_equal_caption_counts_is_refused_naming_its_file(stored_cell):
    path = stored_cell / "results.json"
    record = json.loads(path.read_text(encoding="utf-8"))
    record["metrics"]["digits"]["n_texts"] = 5001.0
    path.write_text(json.dumps(record), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"seed0/results.json: digits has 5001 captions of 1000 images") as err:
        caption_clusters(find_cells(stored_cell.parents[3]))
    assert "python -m clipmag_experiments.sweep.caption_layout" in str(err.value)  # the way out


def _uneven(cell: Path) -> list[int]:
    """Make the stored cell's test set one of uneven caption counts (image i has 1 + i % 7 captions,
    as far as 5,000 captions reach); returns the image of each caption."""
    owners = [i for i in range(2000) for _ in range(1 + i % 7)][:5000]
    path = cell / "results.json"
    record = json.loads(path.read_text(encoding="utf-8"))
    record["metrics"]["digits"]["n_images"] = float(max(owners) + 1)
    path.write_text(json.dumps(record), encoding="utf-8")
    return owners


def test_uneven_captions_are_grouped_by_the_image_a_run_recorded_for_each(stored_cell):
    owners = _uneven(stored_cell)
    path = stored_cell / "results.json"
    record = json.loads(path.read_text(encoding="utf-8"))
    record["metrics"]["digits"]["image_of_text"] = owners
    path.write_text(json.dumps(record), encoding="utf-8")
    ((_, clusters),) = caption_clusters(find_cells(stored_cell.parents[3])).items()
    assert clusters["text-0"] == "captions of image-0" != clusters["text-1"] == clusters["text-2"]
    assert clusters["text-4999"] == f"captions of image-{owners[-1]}" and len(set(clusters.values())) == max(owners) + 1


def test_uneven_captions_of_older_runs_are_grouped_by_the_layout_read_from_the_shards(stored_cell):
    owners = _uneven(stored_cell)
    ((_, clusters),) = caption_clusters(find_cells(stored_cell.parents[3]), {"digits": owners}).items()
    assert clusters["text-3"] == "captions of image-2" and clusters["text-4999"] == f"captions of image-{owners[-1]}"
    with pytest.raises(ConfigError, match=r"its caption layout names 4999 captions .*another test set"):
        caption_clusters(find_cells(stored_cell.parents[3]), {"digits": owners[:-1]})


def test_the_clip_table_tests_captions_over_images_and_its_words_are_its_marks(tmp_path):
    """Cosine and qnorm of the stored symmetric-InfoNCE group: text -> image compared over the 1,000
    images, image -> text over the 1,000 image queries; the prose's words are the row marks, and Holm
    over the whole table stands beside them."""
    group = tmp_path / "results" / clip.SWEEPS["clip"] / "infonce-sym" / "default"
    for head in ("cosine", "qnorm"):
        shutil.copytree(STORED.parents[1] / head, group / head)
    stored = StoredResults(tmp_path / "results")
    rows = clip.tested_table(stored, clip.SWEEPS["clip"])
    table = {row.metric: row.cells["qnorm"].comparison for row in rows}
    assert table["t2i_r1_head"].n_units == 1000 and table["t2i_r1_head"].n_queries == 5000
    assert table["i2t_r1_head"].n_units is None  # an image query is its own unit
    for metric in ("i2t_r1_head", "t2i_r1_head"):
        words = verdict(table[metric]) + family_mark(table[metric])  # † where the whole table's Holm keeps it
        assert clip.VALUES["clip-verdict"](stored, f"infonce-sym/{metric}/qnorm") == words
    tested = [c for c in table.values() if c is not None]
    assert clip.VALUES["clip-tests"](stored, "") == str(len(tested))
    assert [c.p_family for c in tested] == holm([c.p for c in tested])
