"""The Contriever-style pretraining corpus: documents of pinned wheels that no fight reads, with
copies of held-out functions dropped, as shards the crop mode trains on."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest

from clipmag.errors import UserError
from text_retrieval.data.bundled.pinned_wheels import PINS_FILE, read_pins
from text_retrieval.data.bundled.pretrain_corpus import PRETRAIN_PINS_FILE, build_pretrain_corpus, overlapping_pins
from text_retrieval.data.training.shards import TextShardStream, load_shard

COPIED = "def shared_helper(values):\n    total = 0\n    for v in values:\n        total += v\n    return total\n"
PROSE = " ".join(f"word{i}" for i in range(100))


def _wheel(folder: Path, name: str, members: dict[str, str]) -> dict[str, str]:
    """A wheel file of ``members`` in ``folder``; its pin."""
    path = folder / f"{name}-1.0-py3-none-any.whl"
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in members.items():
            archive.writestr(member, text)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return {"name": name, "version": "1.0", "file": path.name, "sha256": digest, "split": "train"}


def _pins(path: Path, pins: list[dict[str, str]]) -> Path:
    path.write_text(json.dumps({"packages": pins}), encoding="utf-8")
    return path


@pytest.fixture
def corpus_inputs(tmp_path):
    """A pretraining wheel with its own code, a copy of a fight's function, docs, tests and a license;
    a fight's wheel holding that function; and a held-out tree."""
    own = "def own_function(x):\n    '''Square a number.'''\n    y = x * x\n    return y\n" + f"# {PROSE}\n"
    pretrain = _wheel(
        tmp_path / "cache",
        "alpha",
        {
            "alpha/__init__.py": own,
            "alpha/copied.py": COPIED + f"# {PROSE}\n",
            "alpha/tests/test_alpha.py": f"# {PROSE}\n",
            "alpha/guide.md": PROSE + " guide",
            "alpha-1.0.dist-info/METADATA": "Name: alpha\nVersion: 1.0\n\n" + PROSE + " description",
            "alpha-1.0.dist-info/LICENSE.txt": PROSE + " license",
        },
    )
    fight = _wheel(tmp_path / "pypi-cache", "beta", {"beta/__init__.py": COPIED})
    held = tmp_path / "held" / "gamma"
    held.mkdir(parents=True)
    (held / "__init__.py").write_text("def unrelated(a, b):\n    c = a + b\n    d = c * 2\n    return d\n")
    return {
        "pins": _pins(tmp_path / "pretrain_pins.json", [pretrain]),
        "pypi_pins": _pins(tmp_path / "pypi_pins.json", [fight]),
        "cache": tmp_path / "cache",
        "pypi_cache": tmp_path / "pypi-cache",
        "held_out": {"gamma": held},
        "root": tmp_path / "corpus",
    }


def _build(inputs, **settings):
    return build_pretrain_corpus(
        inputs["root"],
        cache=inputs["cache"],
        pypi_cache=inputs["pypi_cache"],
        pins_file=inputs["pins"],
        pypi_pins=inputs["pypi_pins"],
        held_out=inputs["held_out"],
        words_per_document=40,
        min_words=10,
        **settings,
    )


def test_corpus_keeps_own_text_and_drops_a_fights_function_tests_and_licenses(corpus_inputs):
    paths = _build(corpus_inputs)
    rows = load_shard(str(next(paths["shards"].glob("*.tar"))))
    ids = {r["query"].split("#")[0] for r in rows}
    assert ids == {"alpha/alpha/__init__.py", "alpha/alpha/guide.md", "alpha/alpha-1.0.dist-info/METADATA"}
    text = " ".join(r["positive"] for r in rows)
    assert "shared_helper" not in text and "license" not in text and "Version:" not in text
    assert all(10 <= len(r["positive"].split()) <= 40 for r in rows)
    manifest = json.loads(paths["manifest"].read_text())
    counts = manifest["per_package"]["alpha"]
    assert counts["held_out_copy_files"] == 1 and counts["py_files"] == 1 and counts["doc_files"] == 2
    assert manifest["sizes"]["documents"] == len(rows) == TextShardStream(paths["shards"], 2).num_samples
    assert "beta==1.0" in manifest["key"]["held_out"]
    before = paths["manifest"].read_bytes()
    assert _build(corpus_inputs) == paths and paths["manifest"].read_bytes() == before  # same key: reused


def test_a_package_a_fight_reads_is_refused(corpus_inputs, tmp_path):
    pin = json.loads(corpus_inputs["pypi_pins"].read_text())["packages"][0]
    corpus_inputs["pins"] = _pins(tmp_path / "clash.json", [pin])
    with pytest.raises(UserError, match="beta is also read by a fight"):
        _build(corpus_inputs)


def test_the_pinned_pretraining_packages_are_read_by_no_fight():
    assert overlapping_pins(read_pins(PRETRAIN_PINS_FILE), PINS_FILE) == []
