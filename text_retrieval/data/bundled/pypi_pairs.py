"""Docstring -> code pairs at scale from pinned PyPI wheels, split by whole package: a training set
large enough that no budget repeats a pair, with a dev set and a test set of packages never trained on.

The bundled code-search set has 2,500 training pairs, so a long run repeats them for epochs. This
set reads the source of the wheels pinned in ``pypi_pins.json`` (name, version, file, sha256, and
the split the whole package goes to: ``train``, ``dev`` or ``test``). ``build_pypi_pairs(root)``:

1. fetches each wheel into ``cache`` with ``pip download --no-deps`` for CPython 3.11 on
   manylinux x86_64 (nothing is installed) unless a file with the pinned sha256 is already there,
   and refuses a file whose sha256 differs from the pin;
2. reads the ``.py`` files of each wheel (tests, vendored code and non-package folders left out,
   as :mod:`text_retrieval.data.bundled.extract` does for installed trees) and extracts one pair
   per function with a usable docstring summary;
3. drops every pair whose code or summary also occurs - after normalisation, so near copies go too
   (code without comment lines and whitespace, summary case-folded without punctuation) - in a
   held-out tree: the standard library and scikit-learn (the code-search test sets) and the
   packages minilm-dot was continued on (:data:`STAGE1_PACKAGES`, the stage-1 step of the
   positive-regime and budget sweeps);
4. keeps each code and each summary once over the whole set, reading the packages in stages - dev,
   test, train, then the extra training packages of ``pypi_pins_more_train.json`` when asked for -
   so a copy in a later stage is what goes, and what a stage keeps never depends on the stages after
   it; a summary two functions of one stage share is ambiguous and goes from both. Every pair is
   distinct in both its query and its document and no pair crosses a split.

It writes ``train/pairs.jsonl`` and ``train/shards/`` (shuffled with ``seed``), ``pypi-dev/`` and
``pypi-test/`` (BEIR layout: ``n_dev`` / ``n_test`` queries drawn with ``seed`` from the split's
pairs, a corpus of their code plus the split's other functions up to ``corpus_size``) and
``manifest.json`` (the pins and their sha256, the version each held-out tree was read from, per-package
counts of what was kept and dropped and why, and the sha256 of the training pairs). The same pins,
held-out versions and settings give byte-identical files; a later call with the same key returns at
once; offline once the cache holds the wheels.

    python -m text_retrieval.data.bundled.pypi_pairs runs/data/pypi-pairs --cache runs/data/pypi-wheels
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clipmag.config.checks import PositiveInt
from clipmag.config.command_line import field_flags, parse_cli, require_words
from clipmag.errors import UserError
from clipmag.results.provenance import provenance
from clipmag.runtime.logs import setup_logging
from clipmag.storage.files import write_text_atomic
from text_retrieval.data.bundled.build import STDLIB_EXCLUDED, sample_functions, write_beir
from text_retrieval.data.bundled.extract import CodeFunction, extract_functions, installed_package_dir
from text_retrieval.data.bundled.package_pairs import built_with, default_held_out, distribution_version
from text_retrieval.data.bundled.pinned_wheels import (
    MORE_TRAIN_PINS_FILE,
    PINS_FILE,
    SPLITS,
    Pin,
    fetch_wheel,
    read_pins,
    unpack_sources,
)
from text_retrieval.data.training.shards import write_text_shards

logger = logging.getLogger("clipmag")

__all__ = [
    "MORE_TRAIN_PINS_FILE",
    "PINS_FILE",
    "STAGE1_PACKAGES",
    "PypiPairsCommand",
    "build_pypi_pairs",
    "held_out_versions",
    "read_pins",
    "main",
]

PYPI_PAIRS_VERSION = 2  # bump whenever a change alters the files written
# evaluation sizes: at least 1,000 queries each, so a comparison can resolve about a point of nDCG@10
DEV_QUERIES = 1000
TEST_QUERIES = 1000
CORPUS_SIZE = 5000
SAMPLES_PER_SHARD = 1000
# minilm-dot's continued-pretraining packages (the stage-1 prepare step of positive_regime.yaml and
# budget.yaml): held out, so no start has trained on a pair of this set
STAGE1_PACKAGES = (
    "numpy",
    "scipy",
    "pandas",
    "matplotlib",
    "sympy",
    "networkx",
    "torch",
    "transformers",
    "timm",
    "huggingface_hub",
    "gensim",
    "tensorboard",
    "rich",
    "pydantic",
)
# what the duplicate rules drop, counted per package in the manifest
DROP_REASONS = ("held_out_copies", "code_copies", "no_summary", "shared_summary")
_COMMENT_LINE = re.compile(r"^\s*#.*$", re.MULTILINE)
_NOT_WORD = re.compile(r"[^\w\s]")


def code_key(code: str) -> str:
    """The code without comment lines and white space: two functions that differ only there are one."""
    return "".join(_COMMENT_LINE.sub("", code).split())


def summary_key(summary: str) -> str:
    """The summary case-folded, without punctuation, on single spaces."""
    return " ".join(_NOT_WORD.sub(" ", summary.casefold()).split())


def _held_out_keys(trees: Mapping[str, Path]) -> tuple[set[str], set[str]]:
    """Normalised codes and summaries of every function in the held-out trees."""
    codes: set[str] = set()
    summaries: set[str] = set()
    for name, tree in trees.items():
        for fn in extract_functions(tree, STDLIB_EXCLUDED if name == "stdlib" else frozenset()):
            codes.add(code_key(fn.code))
            if fn.summary:
                summaries.add(summary_key(fn.summary))
    return codes, summaries


def default_held_out_trees() -> dict[str, Path]:
    """The code-search test trees and the stage-1 packages, as installed here."""
    trees = default_held_out()
    trees |= {name: installed_package_dir(name, "the PyPI pair set's held-out trees") for name in STAGE1_PACKAGES}
    return trees


def _distinct(
    stages: Sequence[Mapping[str, list[CodeFunction]]], held: tuple[set[str], set[str]]
) -> tuple[dict[str, list[CodeFunction]], dict[str, dict[str, int]]]:
    """Per package, the functions left after the held-out and duplicate rules (module docstring), and
    what each rule dropped. ``stages`` come in reading order (dev, test, then train packages): a code
    or summary an earlier stage holds goes from the later one, and a summary two functions of one
    stage share goes from both, so what a stage keeps never depends on the stages after it."""
    held_codes, held_summaries = held
    seen_codes: set[str] = set()
    seen_summaries: set[str] = set()
    kept: dict[str, list[CodeFunction]] = {}
    counts: dict[str, dict[str, int]] = {}
    for stage in stages:
        summary_count: dict[str, int] = {}
        for name, fns in stage.items():
            row = counts[name] = {"functions": len(fns), **dict.fromkeys(DROP_REASONS, 0)}
            kept[name] = []
            for fn in fns:
                code = code_key(fn.code)
                summary = summary_key(fn.summary) if fn.summary else None
                if code in held_codes or summary in held_summaries:
                    row["held_out_copies"] += 1
                elif code in seen_codes:
                    row["code_copies"] += 1
                elif summary is None:
                    seen_codes.add(code)
                    row["no_summary"] += 1
                elif summary in seen_summaries:
                    seen_codes.add(code)
                    row["shared_summary"] += 1
                else:
                    seen_codes.add(code)
                    kept[name].append(fn)
                    summary_count[summary] = summary_count.get(summary, 0) + 1
        for name in stage:
            ambiguous = [f for f in kept[name] if summary_count[summary_key(f.summary or "")] > 1]
            counts[name]["shared_summary"] += len(ambiguous)
            kept[name] = [f for f in kept[name] if summary_count[summary_key(f.summary or "")] == 1]
            counts[name]["kept"] = len(kept[name])
        seen_summaries |= summary_count.keys()
    return kept, counts


def _jsonl(rows: Iterable[Mapping[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)


def held_out_versions(trees: Mapping[str, Path]) -> dict[str, str]:
    """What each held-out tree was read from: the interpreter for the standard library, the installed
    distribution otherwise. Another version is other code, so the set is built again."""
    return {
        name: f"python=={sys.version.split()[0]}" if name == "stdlib" else distribution_version(name) for name in trees
    }


def _read_more_train(path: str | Path | None, pins: Sequence[Pin]) -> list[Pin]:
    """The extra training pins of ``path``: train packages only, none already pinned."""
    if path is None:
        return []
    more = read_pins(path)
    wrong = [p.name for p in more if p.split != "train"]
    if wrong:
        raise UserError(f"{path}: {', '.join(wrong)} is not split 'train'; this file only adds training packages")
    twice = sorted({p.name for p in more} & {p.name for p in pins})
    if twice:
        raise UserError(f"{path}: {', '.join(twice)} is already pinned in the main pin file")
    return more


def build_pypi_pairs(
    root: str | Path,
    *,
    cache: str | Path,
    pins_file: str | Path = PINS_FILE,
    more_train_pins: str | Path | None = None,
    n_dev: int = DEV_QUERIES,
    n_test: int = TEST_QUERIES,
    corpus_size: int = CORPUS_SIZE,
    seed: int = 0,
    min_train_pairs: int = 1,
    held_out: Mapping[str, Path] | None = None,
) -> dict[str, Path]:
    """Build (or reuse) the set under ``root`` (module docstring); returns the paths ``pairs``,
    ``shards``, ``dev``, ``test`` and ``manifest``. ``more_train_pins``: a pin file of training
    packages read after all others (:data:`MORE_TRAIN_PINS_FILE`), which leaves the dev and test sets
    and the main training pairs as they are. ``held_out`` maps names to source trees whose functions
    are kept out (default: :func:`default_held_out_trees`); fewer than ``min_train_pairs`` training
    pairs is an error, so a run of that many pairs never repeats one."""
    root, cache = Path(root), Path(cache)
    pins = read_pins(pins_file)
    more = _read_more_train(more_train_pins, pins)
    held_out = dict(held_out) if held_out is not None else default_held_out_trees()
    pinned_held = sorted({p.name for p in [*pins, *more]} & set(held_out))
    if pinned_held:
        raise UserError(f"{pins_file}: {', '.join(pinned_held)} is held out (test data or a start's training data)")
    key = {
        "version": PYPI_PAIRS_VERSION,
        "pins": {p.name: {"version": p.version, "sha256": p.sha256, "split": p.split} for p in pins},
        "more_train_pins": {p.name: {"version": p.version, "sha256": p.sha256} for p in more},
        "held_out": held_out_versions(held_out),
        "settings": {"n_dev": n_dev, "n_test": n_test, "corpus_size": corpus_size, "seed": seed},
    }
    paths = {
        "pairs": root / "train" / "pairs.jsonl",
        "shards": root / "train" / "shards",
        "dev": root / "pypi-dev",
        "test": root / "pypi-test",
        "manifest": root / "manifest.json",
    }
    if built_with(paths["manifest"], key):
        logger.info("PyPI pairs up to date in %s", root)
        return paths
    paths["manifest"].unlink(missing_ok=True)  # absent until the build completes
    stages = [sorted((p for p in pins if p.split == split), key=lambda p: p.name) for split in SPLITS]
    stages.append(sorted(more, key=lambda p: p.name))
    functions = [{pin.name: _pin_functions(pin, cache) for pin in stage} for stage in stages]
    logger.info("PyPI pairs: holding out %s", ", ".join(sorted(held_out)))
    kept, counts = _distinct(functions, _held_out_keys(held_out))
    ordered = [pin for stage in stages for pin in stage]
    by_split = {split: [f for p in ordered if p.split == split for f in kept[p.name]] for split in SPLITS}
    if len(by_split["train"]) < min_train_pairs:
        raise UserError(
            f"{pins_file}: {len(by_split['train']):,} training pairs are left, fewer than the {min_train_pairs:,} "
            "asked for (min_train_pairs: a run longer than the set would repeat pairs); pin more train packages"
        )
    train = sorted(by_split["train"], key=lambda f: f.doc_id)
    random.Random(f"{seed}:train").shuffle(train)
    rows = [{"query": f.summary, "positive": f.code, "doc_id": f.doc_id} for f in train]
    text = _jsonl(rows)
    write_text_atomic(paths["pairs"], text)
    shards = write_text_shards(rows, paths["shards"], SAMPLES_PER_SHARD, overwrite=True)
    sizes = {"train_pairs": len(rows), "train_shards": len(shards)}
    for split, n, stage in (("dev", n_dev, functions[0]), ("test", n_test, functions[1])):
        if by_split[split]:
            pool = [f for fns in stage.values() for f in fns]
            queries = sample_functions(by_split[split], n, seed, split)
            sizes |= {
                f"{split}_{k}": v
                for k, v in write_beir(paths[split], {split: queries}, pool, corpus_size, seed).items()
            }
            sizes[f"{split}_pool"] = len(by_split[split])
    manifest = {
        "key": key,
        "sizes": sizes,
        "per_package": {
            p.name: {"split": p.split, "file": p.file, "more_train": p in more, **counts[p.name]} for p in ordered
        },
        "sha256_train_pairs": hashlib.sha256(text.encode("utf-8")).hexdigest(),
        "description": "see text_retrieval/data/bundled/pypi_pairs.py",
        "provenance": provenance(),
    }
    write_text_atomic(paths["manifest"], json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    logger.info("PyPI pairs: %s", ", ".join(f"{k} {v:,}" for k, v in sizes.items()))
    return paths


def _pin_functions(pin: Pin, cache: Path) -> list[CodeFunction]:
    """The functions of one pinned wheel, fetched and unpacked into ``cache`` when needed."""
    source = unpack_sources(fetch_wheel(pin, cache), cache / "src" / pin.sha256[:16])
    return extract_functions(source, prefix=f"{pin.name}/")


@dataclass
class PypiPairsCommand:
    """ROOT: the output folder; ``cache``: where the wheels and their unpacked sources are kept;
    ``pins``: the pin file (unset: ``pypi_pins.json`` beside this module); ``more_train``: add the
    training packages of ``pypi_pins_more_train.json`` (the dev and test sets stay the same). The dev
    set is read at every evaluated checkpoint, so its size is a cost on CPUs."""

    root: str = ""
    cache: str = "runs/data/pypi-wheels"
    pins: str | None = None
    more_train: bool = False
    n_dev: PositiveInt = DEV_QUERIES
    n_test: PositiveInt = TEST_QUERIES
    corpus_size: PositiveInt = CORPUS_SIZE
    seed: int = 0
    min_train_pairs: PositiveInt = 1


def main(argv: Sequence[str]) -> None:
    """Build the set: ``python -m text_retrieval.data.bundled.pypi_pairs ROOT [--cache DIR]``."""
    cmd = parse_cli(PypiPairsCommand, argv, field_flags(PypiPairsCommand), description=__doc__, positional="root")
    require_words(cmd, ("root",))
    setup_logging()
    paths = build_pypi_pairs(
        cmd.root,
        cache=cmd.cache,
        pins_file=cmd.pins or PINS_FILE,
        more_train_pins=MORE_TRAIN_PINS_FILE if cmd.more_train else None,
        n_dev=cmd.n_dev,
        n_test=cmd.n_test,
        corpus_size=cmd.corpus_size,
        seed=cmd.seed,
        min_train_pairs=cmd.min_train_pairs,
    )
    print(f"PyPI pairs -> {paths['shards']}, dev {paths['dev']}, test {paths['test']} (manifest {paths['manifest']})")


if __name__ == "__main__":
    from clipmag.config.entry import run_entry_point

    run_entry_point(main)
