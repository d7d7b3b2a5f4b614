"""The PyPI pair set on small wheels: whole packages per split, no pair twice (exactly or nearly), no
pair from a held-out tree, pins checked by sha256, and the same files from the same inputs."""

from __future__ import annotations

import hashlib
import json
import platform
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
import yaml

from clipmag.errors import UserError
from text_retrieval.data.bundled.package_pairs import default_held_out
from text_retrieval.data.bundled.pypi_pairs import (
    MORE_TRAIN_PINS_FILE,
    PINS_FILE,
    STAGE1_PACKAGES,
    PypiPairsCommand,
    build_pypi_pairs,
    code_key,
    held_out_versions,
    read_pins,
    summary_key,
)
from text_retrieval.data.loaders.beir import load_beir

REPO = Path(__file__).resolve().parents[1]


def _function(name: str, summary: str, body: str = "total = 0") -> str:
    return f'''
def {name}(values):
    """{summary}"""
    {body}
    for value in values:
        total = total + value * {len(name)}
    return total
'''


HELD_OUT = _function("held_sum", "Add every value of a held out tree together.")
PACKAGES = {
    # a copy of the held-out function (with another comment) and two functions of its own
    "alpha": _function("held_sum", "Add every value of a held out tree together.", "total = 0  # start")
    + _function("alpha_one", "Compute the first alpha score of the values.")
    + _function("alpha_two", "Return the weighted alpha total of all values."),
    # the same summary as a dev function, up to case and punctuation: the dev pair stays, this copy goes
    "beta": _function("beta_one", "compute the DEV score of the values!")
    + _function("beta_two", "Fold the beta values into one running number."),
    "devpkg": _function("dev_one", "Compute the dev score of the values.")
    + _function("dev_two", "Sum the development values after scaling them."),
    # a near copy of a dev function's code (comments and spacing only): only the dev copy stays
    "gamma": _function("dev_two", "Accumulate gamma values after scaling them.").replace(
        "    return", "    # out\n    return"
    )
    + _function("gamma_two", "Merge the gamma values into a single sum."),
    "testpkg": _function("test_one", "Measure the test score of all values.")
    + _function("test_two", "Score the test values with a weighting."),
}
SPLIT = {"alpha": "train", "beta": "train", "gamma": "train", "devpkg": "dev", "testpkg": "test", "delta": "train"}
# a training package of the extra pin group: a dev summary, a main training pair's code and summary, one new pair
MORE_TRAIN = (
    _function("delta_one", "Compute the dev score of the values.")
    + _function("alpha_one", "A summary of its own over copied alpha code.")
    + _function("delta_three", "Fold the beta values into one running number.")
    + _function("delta_two", "Fold the delta values into one running total.")
)


def _wheel(folder: Path, name: str, source: str) -> dict[str, str]:
    path = folder / f"{name}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{name}/__init__.py", "")
        archive.writestr(f"{name}/core.py", source)
        archive.writestr(f"{name}/tests/test_core.py", _function("test_hidden", "A test that never becomes a pair."))
        archive.writestr(f"{name}-1.0.dist-info/METADATA", "Name: " + name)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return {"name": name, "version": "1.0", "file": path.name, "sha256": digest, "split": SPLIT[name]}


@pytest.fixture
def small(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    pins = tmp_path / "pins.json"
    pins.write_text(json.dumps({"packages": [_wheel(cache, n, s) for n, s in PACKAGES.items()]}))
    held = tmp_path / "held" / "heldpkg"
    held.mkdir(parents=True)
    (held / "__init__.py").write_text(HELD_OUT)
    return {"cache": cache, "pins_file": pins, "held_out": {"heldpkg": held.parent}}


def _build(root: Path, small: dict) -> dict[str, Path]:
    return build_pypi_pairs(root, n_dev=5, n_test=5, corpus_size=10, **small)


def test_pairs_are_distinct_disjoint_from_held_out_trees_and_split_by_package(tmp_path, small):
    paths = _build(tmp_path / "set", small)
    train = [json.loads(line) for line in paths["pairs"].read_text().splitlines()]
    dev, test = load_beir(paths["dev"], split="dev"), load_beir(paths["test"], split="test")
    assert sorted(p["doc_id"].split("/")[0] for p in train) == ["alpha", "alpha", "beta", "gamma"]
    assert {d.split("/")[0] for d in dev.corpus_ids} == {"devpkg"} and {d.split("/")[0] for d in test.corpus_ids} == {
        "testpkg"
    }
    queries = [p["query"] for p in train] + list(dev.queries.values()) + list(test.queries.values())
    codes = [p["positive"] for p in train] + dev.corpus_texts + test.corpus_texts
    assert len({summary_key(q) for q in queries}) == len(queries) and len({code_key(c) for c in codes}) == len(codes)
    assert not any("held out" in q or "hidden" in q for q in queries)  # the held-out copy and the tests' code
    assert "Compute the dev score of the values." in dev.queries.values()  # its near twin in a train package went
    manifest = json.loads(paths["manifest"].read_text())
    assert manifest["per_package"]["alpha"]["held_out_copies"] == 1
    assert manifest["per_package"]["gamma"]["code_copies"] == 1
    assert manifest["per_package"]["beta"]["shared_summary"] == 1 and manifest["per_package"]["devpkg"]["kept"] == 2
    assert manifest["sizes"]["train_pairs"] == 4 and manifest["sizes"]["dev_pool"] == 2
    again = _build(tmp_path / "again", small)
    written = sorted(p.relative_to(tmp_path / "set") for p in (tmp_path / "set").rglob("*") if p.is_file())
    for name in (p for p in written if p.name != "manifest.json"):  # a manifest records when it was built
        assert (tmp_path / "set" / name).read_bytes() == (again["manifest"].parent / name).read_bytes()


def test_more_training_packages_leave_the_dev_and_test_sets_and_the_main_pairs_as_they_are(tmp_path, small):
    more = tmp_path / "more.json"
    more.write_text(json.dumps({"packages": [_wheel(small["cache"], "delta", MORE_TRAIN)]}))
    base, larger = _build(tmp_path / "base", small), _build(tmp_path / "larger", {**small, "more_train_pins": more})
    for split in ("dev", "test"):
        for name in ("corpus.jsonl", "queries.jsonl", f"qrels/{split}.tsv"):
            assert (base[split] / name).read_bytes() == (larger[split] / name).read_bytes()
    rows = [
        {json.loads(line)["doc_id"] for line in paths["pairs"].read_text().splitlines()} for paths in (base, larger)
    ]
    assert rows[1] - rows[0] == {"delta/delta/core.py:delta_two"} and rows[0] < rows[1]
    delta = json.loads(larger["manifest"].read_text())["per_package"]["delta"]
    assert delta["more_train"] and (delta["kept"], delta["code_copies"], delta["shared_summary"]) == (1, 1, 2)


def test_the_extra_pin_group_only_adds_packages_to_train(tmp_path, small):
    pins = json.loads(small["pins_file"].read_text())["packages"]
    more = tmp_path / "more.json"
    for entry, problem in (
        ({**pins[0], "name": "other", "split": "dev"}, "is not split 'train'"),
        (pins[0], "already"),
    ):
        more.write_text(json.dumps({"packages": [entry]}))
        with pytest.raises(UserError, match=problem):
            _build(tmp_path / "set", {**small, "more_train_pins": more})


def test_the_key_names_the_version_of_every_held_out_tree():
    """A newer scikit-learn or Python is other held-out code, so the set is built again under it."""
    versions = held_out_versions(default_held_out())
    assert versions == {
        "stdlib": f"python=={platform.python_version()}",
        "sklearn": f"scikit-learn=={metadata.version('scikit-learn')}",
    }


def test_a_wheel_whose_sha256_is_not_the_pin_is_refused(tmp_path, small):
    wheel = next(small["cache"].glob("alpha-*.whl"))
    with zipfile.ZipFile(wheel, "a") as archive:
        archive.writestr("alpha/extra.py", "X = 1\n")
    with pytest.raises(UserError, match="is not the pinned"):
        _build(tmp_path / "set", small)


def test_a_pinned_package_may_not_be_a_held_out_tree(tmp_path, small):
    with pytest.raises(UserError, match="alpha is held out"):
        _build(tmp_path / "set", {**small, "held_out": {**small["held_out"], "alpha": tmp_path}})


def test_the_held_out_starts_are_the_stage1_packages_of_the_sweeps():
    """minilm-dot was continued on these packages' pairs: the set holds them out by name."""
    for sweep in ("positive_regime", "budget"):
        config = yaml.safe_load((REPO / "configs" / "sweeps" / f"{sweep}.yaml").read_text())
        step = next(s for s in config["prepare"] if s["name"] == "package-pairs")
        assert tuple(step["args"][step["args"].index("--packages") + 1 :]) == STAGE1_PACKAGES
    pins = json.loads((REPO / "text_retrieval" / "data" / "bundled" / "pypi_pins.json").read_text())["packages"]
    names = {p["name"].replace("-", "_") for p in pins}
    assert not names & {*STAGE1_PACKAGES, "scikit_learn", "sklearn"}
    assert {p["split"] for p in pins} == {"train", "dev", "test"}


def test_the_manual_describes_the_set_the_pins_and_the_command_build():
    """The manual's sentence on the set (wheels, packages per split, queries and documents) is the pin
    files' and the command's defaults."""
    pins, more = read_pins(PINS_FILE), read_pins(MORE_TRAIN_PINS_FILE)
    split = {s: [p.name for p in pins if p.split == s] for s in ("train", "dev", "test")}
    command = PypiPairsCommand()
    docs = " ".join((REPO / "docs" / "experiments.md").read_text().split())
    assert (
        f"**The PyPI pair set**, read from {len(pins)} wheels" in docs
        and f"train ({len(split['train'])} packages)" in docs
    )
    for name, n in (("dev", command.n_dev), ("test", command.n_test)):
        assert f"{name} ({', '.join(split[name])}: {n:,} queries over {command.corpus_size:,} documents)" in docs
    assert f"`--more-train` adds {len(more)} training wheels" in docs
