"""Names that become paths never lead out of the folder the user named: a sweep's groups, variants,
heads, evaluations and model labels, a data set's name in a cache or download folder. ``..``, ``/``,
an absolute path and an empty name are refused in one line (or made a plain name where the name is
read from data), and two names that differ only in case never share a folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from clipmag.storage.naming import check_folder_name, distinct_labels, folder_part, slug
from clipmag_experiments.design.expansion import expand
from clipmag_experiments.design.grid import GridExtension, SweepConfig, SweepEvaluation, SweepGroup, SweepVariant

BAD_NAMES = ["..", "../../escaped-group", "a/b", "/tmp/abs", "", ".", ".hidden", "a\\b", "x" * 101]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_a_bad_folder_name_is_refused_naming_it(name):
    with pytest.raises(ValueError, match=r"^sweep group .*: a name that becomes a folder") as err:
        check_folder_name(name, "sweep group")
    assert "\n" not in str(err.value) and len(str(err.value)) < 300


def _sweep(tmp_path: Path, **group: object) -> SweepConfig:
    values = {"name": "g", "kind": "text", "heads": ["cosine"], **group}
    return SweepConfig(output_dir=str(tmp_path / "sweep"), groups=[SweepGroup(**values)])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "group, named",
    [
        ({"name": "../../escaped-group"}, "sweep group '../../escaped-group'"),
        ({"name": "/abs"}, "sweep group '/abs'"),
        ({"name": ""}, "sweep group ''"),
        ({"variants": [SweepVariant("a/b")]}, "sweep group 'g': variant 'a/b'"),
        (
            {"variants": [SweepVariant("ok")], "extend": GridExtension(high=[SweepVariant("..")])},
            "sweep group 'g': variant '..'",
        ),
        ({"heads": ["../cosine"]}, "sweep group 'g': head '../cosine'"),
        ({"evaluations": [SweepEvaluation(kind="rag", name="../out")]}, "sweep group 'g': evaluation '../out'"),
    ],
)
def test_a_sweep_name_that_would_leave_its_folder_is_refused_before_any_cell(tmp_path, group, named):
    with pytest.raises(ValueError) as err:
        expand(_sweep(tmp_path, **group))
    assert str(err.value).startswith(named) and "\n" not in str(err.value)
    assert not (tmp_path / "sweep").exists()


def test_names_that_differ_only_in_case_are_refused_as_one_folder(tmp_path):
    cfg = _sweep(tmp_path, variants=[SweepVariant("Scale5"), SweepVariant("scale5")])
    both = r"sweep cell g/cosine-Scale5/seed0 and sweep cell g/cosine-scale5/seed0 would write into one folder"
    with pytest.raises(ValueError, match=both):
        expand(cfg)
    groups = [SweepGroup(name="Grid", heads=["cosine"]), SweepGroup(name="grid", heads=["cosine"])]
    with pytest.raises(ValueError, match="differ only in case"):
        expand(SweepConfig(output_dir=str(tmp_path / "sweep"), groups=groups))


@pytest.mark.parametrize("label", ["..", "../..", "/", "a/..", "/abs/.."])
def test_every_cell_of_a_model_label_stays_inside_the_sweep_folder(tmp_path, label):
    root = (tmp_path / "sweep").resolve()
    for cell in expand(_sweep(tmp_path, models=[f"{label}=all-MiniLM-L6-v2"])):
        assert cell.directory.resolve().is_relative_to(root), cell.directory


@pytest.mark.parametrize("name", ["..", "../../x", "/etc/passwd", "", ".", "a/../.."])
def test_a_name_read_from_data_becomes_one_plain_folder_name(tmp_path, name):
    for part in (slug(name), folder_part(name)):
        assert part and part.strip(".") and "/" not in part
        assert (tmp_path / part).resolve().parent == tmp_path.resolve()
    assert folder_part("bright-biology@official") == "bright-biology@official"  # a plain name keeps its folder


def test_labels_that_differ_only_in_case_get_distinct_file_names():
    labels = distinct_labels(["SciFact", "scifact"], ["data/a/SciFact", "data/b/scifact"])
    assert len({slug(label).lower() for label in labels}) == 2


def test_a_beir_name_that_leaves_the_data_folder_is_refused_before_fetching(tmp_path):
    from text_retrieval.data.fetch import download_beir

    with pytest.raises(ValueError, match=r"^BEIR data set '\.\./\.\./x': a name that becomes a folder"):
        download_beir("../../x", tmp_path / "beir")
    assert not (tmp_path / "beir").exists()
