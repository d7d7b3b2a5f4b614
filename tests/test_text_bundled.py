"""The bundled default data set: deterministic, split by module without leakage, loadable.

Built from a small real slice of the standard library (symlinked into a temporary tree) and one
scikit-learn subpackage, so the whole builder runs in about a second.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import platform
import sysconfig
from importlib import metadata
from pathlib import Path

import pytest
import torch

from clipmag.config.build import build_config
from clipmag.errors import UserError
from clipmag.runtime.distributed import DistributedContext
from text_retrieval.config import TextConfig
from text_retrieval.data.bundled.build import build_bundled
from text_retrieval.data.bundled.extract import extract_file, summarize_docstring
from text_retrieval.data.loaders.beir import load_beir
from text_retrieval.data.loaders.sts import load_sts
from text_retrieval.data.training.shards import TextShardStream
from text_retrieval.task import TextRetrievalTask

STDLIB = Path(sysconfig.get_paths()["stdlib"])
MODULES = [
    "json",
    "csv.py",
    "textwrap.py",
    "fractions.py",
    "shlex.py",
    "calendar.py",
    "ipaddress.py",
    "difflib.py",
    "configparser.py",
    "argparse.py",
    "gettext.py",
    "string.py",
    "tarfile.py",
    "pathlib",
    "pathlib.py",
    "tokenize.py",
    "heapq.py",
    "bisect.py",
    "glob.py",
    "fnmatch.py",
    "pprint.py",
    "base64.py",
    "quopri.py",
    "uu.py",
]
SMALL = dict(seed=0, n_train=60, n_test=20, n_dev=10, corpus_size=60, max_module_queries=40, samples_per_shard=16)


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> tuple[Path, Path]:
    stdlib = tmp_path_factory.mktemp("stdlib")
    for name in MODULES:
        if (STDLIB / name).exists():
            (stdlib / name).symlink_to(STDLIB / name)
    sklearn = Path(list(importlib.util.find_spec("sklearn").submodule_search_locations)[0])
    return stdlib, sklearn / "feature_extraction"


@pytest.fixture(scope="module")
def built(sources, tmp_path_factory) -> dict[str, Path]:
    stdlib, ood = sources
    return build_bundled(tmp_path_factory.mktemp("bundled"), stdlib_dir=stdlib, ood_dir=ood, **SMALL)


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_build_is_deterministic_and_cached(built, sources, tmp_path):
    stdlib, ood = sources
    root = built["manifest"].parent
    again = build_bundled(tmp_path / "again", stdlib_dir=stdlib, ood_dir=ood, **SMALL)
    assert _files(again["manifest"].parent) == _files(root)
    corpus = again["indomain"] / "corpus.jsonl"
    stamp = corpus.stat().st_mtime_ns
    assert build_bundled(tmp_path / "again", stdlib_dir=stdlib, ood_dir=ood, **SMALL) == again
    assert corpus.stat().st_mtime_ns == stamp  # reused, not rebuilt
    changed = build_bundled(tmp_path / "again", stdlib_dir=stdlib, ood_dir=ood, **{**SMALL, "seed": 1})
    assert json.loads(changed["manifest"].read_text())["key"]["params"]["seed"] == 1


def test_split_by_module_has_no_leakage(built):
    manifest = json.loads(built["manifest"].read_text())
    test_mods, dev_mods = set(manifest["heldout_modules"]["test"]), set(manifest["heldout_modules"]["dev"])
    assert test_mods and dev_mods and not test_mods & dev_mods
    module = lambda doc_id: doc_id.split("/", 1)[0].split(":", 1)[0].removesuffix(".py")  # noqa: E731
    train = [json.loads(line) for line in built["train_pairs"].read_text().splitlines()]
    assert len(train) == SMALL["n_train"]
    assert not {module(r["doc_id"]) for r in train} & (test_mods | dev_mods)
    for split, mods in (("test", test_mods), ("dev", dev_mods)):
        data = load_beir(built["indomain"], split)
        assert len(data.queries) == SMALL[f"n_{split}"]
        assert {module(d) for rel in data.qrels.values() for d in rel} <= mods
    corpus = load_beir(built["indomain"], "test")
    assert len(corpus.corpus_ids) == SMALL["corpus_size"]
    assert not {r["positive"] for r in train} & set(corpus.corpus_texts)
    assert not {r["query"] for r in train} & set(corpus.queries.values())


def test_outdomain_and_shards(built):
    ood = load_beir(built["outdomain"], "test")
    assert len(ood.queries) == SMALL["n_test"] and len(ood.corpus_ids) == SMALL["corpus_size"]
    stream = TextShardStream(built["train_shards"], batch_size=5)
    assert stream.num_samples == SMALL["n_train"]
    batch = next(stream.batches(0))
    assert len(batch["query"]) == 5 and all(p.startswith(("def ", "async def ", "@")) for p in batch["positive"])


def test_the_held_out_trees_are_read_only_under_their_pinned_versions(built, sources, tmp_path):
    """A pin other than this machine's Python or scikit-learn stops the build before it writes; this
    machine's own versions build the set, which the manifest's key records."""
    stdlib, ood = sources
    python, sklearn = platform.python_version(), metadata.version("scikit-learn")
    for pins, key in (
        ({"python": "3.0.1"}, "data.bundled.python"),
        ({"scikit_learn": "0.1"}, "data.bundled.scikit_learn"),
    ):
        with pytest.raises(UserError, match=rf"{key}: .* pinned to .* but this machine has"):
            build_bundled(tmp_path / "other", stdlib_dir=stdlib, ood_dir=ood, **SMALL, **pins)
        assert not (tmp_path / "other").exists()
    pinned = build_bundled(
        tmp_path / "pinned", stdlib_dir=stdlib, ood_dir=ood, **SMALL, python=python, scikit_learn=sklearn
    )
    key = json.loads(pinned["manifest"].read_text())["key"]
    assert (key["python"], key["packages"]["scikit-learn"]) == (python, sklearn)


def test_a_run_with_a_pin_of_another_version_stops_before_it_reads_a_set(tmp_path):
    cfg = build_config(TextConfig, None, [f"data.bundled.root={tmp_path}", "data.bundled.scikit_learn=0.1"])
    with pytest.raises(UserError, match="data.bundled.scikit_learn"):
        TextRetrievalTask(cfg, DistributedContext(0, 1, 0, torch.device("cpu"), None))
    assert not any(tmp_path.iterdir())


def test_sts_task(built):
    (train,) = load_sts(built["sts"], "train")
    (test,) = load_sts(built["sts"], "test")
    assert len(train) > 1000 and len(test) > 300
    assert 0.0 <= test.scores.min() and test.scores.max() <= 1.0
    train_docs = {t for t in list(train.a) + list(train.b) if " " in t}
    test_docs = {t for t in list(test.a) + list(test.b) if " " in t}
    assert len(test_docs) == 15 and not train_docs & test_docs  # Lee articles split by document


def test_docstring_summary_and_extraction(tmp_path):
    assert summarize_docstring("Return the sum of two numbers.\n\nMore text.") == "Return the sum of two numbers."
    assert summarize_docstring("Split the string at whitespace. Then join it.") == "Split the string at whitespace."
    assert summarize_docstring("S.split(sep=None) -> list of strings") is None
    assert summarize_docstring("Return self.") is None
    src = tmp_path / "mod.py"
    src.write_text(
        "class A:\n"
        "    def area(self, w, h):\n"
        '        """Compute the area of a rectangle quickly.\n\n        Details.\n        """\n\n'
        "        s = w * h\n"
        "        return s\n\n"
        '    def stub(self):\n        """A stub that does nothing at all."""\n        pass\n'
    )
    (fn,) = extract_file(src, tmp_path)
    assert (fn.module, fn.qualname, fn.summary) == ("mod", "A.area", "Compute the area of a rectangle quickly.")
    assert fn.code == "def area(self, w, h):\n    s = w * h\n    return s"


def test_two_builds_of_one_set_at_once_build_it_once_and_both_read_it_whole(sources, tmp_path, caplog):
    """Two runs started together on a fresh checkout: the second waits for the first's build and
    reuses it, instead of deleting the shards the first is already reading."""
    from concurrent.futures import ThreadPoolExecutor

    stdlib, ood = sources
    with caplog.at_level(logging.INFO, logger="clipmag"), ThreadPoolExecutor(2) as pool:
        futures = [
            pool.submit(build_bundled, tmp_path / "shared", stdlib_dir=stdlib, ood_dir=ood, **SMALL) for _ in range(2)
        ]
        first, second = (f.result(timeout=300) for f in futures)
    assert first == second and json.loads(first["manifest"].read_text())["counts"]["train_pairs"] > 0
    assert caplog.text.count("building the bundled data set") == 1
