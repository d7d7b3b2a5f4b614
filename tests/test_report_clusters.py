"""CLIP's text -> image queries are grouped by the image they search for, derived from the stored
test set's layout (each image's captions in a row), so the tests take the image as the unit."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from clipmag.errors import ConfigError
from clipmag_experiments.report.collect import caption_clusters, find_cells

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
    with pytest.raises(ConfigError, match=r"seed0/results.json: digits has 5001 captions of 1000 images"):
        caption_clusters(find_cells(stored_cell.parents[3]))
