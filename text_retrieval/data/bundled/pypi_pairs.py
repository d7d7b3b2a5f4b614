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
4. keeps each code once over the whole set (dev and test packages are read first, so a copy in a
   training package is what goes) and drops a summary shared by two functions everywhere, so every
   pair is distinct in both its query and its document and no pair crosses a split.

It writes ``train/pairs.jsonl`` and ``train/shards/`` (shuffled with ``seed``), ``pypi-dev/`` and
``pypi-test/`` (BEIR layout: ``n_dev`` / ``n_test`` queries drawn with ``seed`` from the split's
pairs, a corpus of their code plus the split's other functions up to ``corpus_size``) and
``manifest.json`` (the pins and their sha256, per-package counts of what was kept and dropped and
why, and the sha256 of the training pairs). The same pins, held-out trees and settings give
byte-identical files; a later call with the same key returns at once; offline once the cache holds
the wheels.

    python -m text_retrieval.data.bundled.pypi_pairs runs/data/pypi-pairs --cache runs/data/pypi-wheels
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import re
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
from text_retrieval.data.bundled.package_pairs import built_with, default_held_out
from text_retrieval.data.bundled.pinned_wheels import PINS_FILE, SPLITS, fetch_wheel, read_pins, unpack_sources
from text_retrieval.data.training.shards import write_text_shards

logger = logging.getLogger("clipmag")

__all__ = ["PINS_FILE", "STAGE1_PACKAGES", "PypiPairsCommand", "build_pypi_pairs", "read_pins", "main"]

PYPI_PAIRS_VERSION = 1  # bump whenever a change alters the files written
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
    functions: Mapping[str, list[CodeFunction]], held: tuple[set[str], set[str]]
) -> tuple[dict[str, list[CodeFunction]], dict[str, dict[str, int]]]:
    """Per package, the functions left after the held-out and duplicate rules (module docstring), and
    what each rule dropped. ``functions`` comes in reading order (dev, test, then train packages)."""
    held_codes, held_summaries = held
    seen_codes: set[str] = set()
    summary_count: dict[str, int] = {}
    kept: dict[str, list[CodeFunction]] = {}
    counts: dict[str, dict[str, int]] = {}
    for name, fns in functions.items():
        row = counts[name] = {"functions": len(fns), "held_out_copies": 0, "code_copies": 0, "no_summary": 0}
        kept[name] = []
        for fn in fns:
            code = code_key(fn.code)
            if code in held_codes or (fn.summary and summary_key(fn.summary) in held_summaries):
                row["held_out_copies"] += 1
            elif code in seen_codes:
                row["code_copies"] += 1
            elif not fn.summary:
                seen_codes.add(code)
                row["no_summary"] += 1
            else:
                seen_codes.add(code)
                kept[name].append(fn)
                summary_count[summary_key(fn.summary)] = summary_count.get(summary_key(fn.summary), 0) + 1
    for name, fns in kept.items():
        counts[name]["shared_summary"] = sum(summary_count[summary_key(f.summary or "")] > 1 for f in fns)
        kept[name] = [f for f in fns if summary_count[summary_key(f.summary or "")] == 1]
        counts[name]["kept"] = len(kept[name])
    return kept, counts


def _jsonl(rows: Iterable[Mapping[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)


def build_pypi_pairs(
    root: str | Path,
    *,
    cache: str | Path,
    pins_file: str | Path = PINS_FILE,
    n_dev: int = 200,
    n_test: int = 300,
    corpus_size: int = 1000,
    seed: int = 0,
    min_train_pairs: int = 1,
    held_out: Mapping[str, Path] | None = None,
) -> dict[str, Path]:
    """Build (or reuse) the set under ``root`` (module docstring); returns the paths ``pairs``,
    ``shards``, ``dev``, ``test`` and ``manifest``. ``held_out`` maps names to source trees whose
    functions are kept out (default: :func:`default_held_out_trees`); fewer than ``min_train_pairs``
    training pairs is an error, so a run of that many pairs never repeats one."""
    root, cache = Path(root), Path(cache)
    pins = read_pins(pins_file)
    held_out = dict(held_out) if held_out is not None else default_held_out_trees()
    pinned_held = sorted({p.name for p in pins} & set(held_out))
    if pinned_held:
        raise UserError(f"{pins_file}: {', '.join(pinned_held)} is held out (test data or a start's training data)")
    key = {
        "version": PYPI_PAIRS_VERSION,
        "pins": {p.name: {"version": p.version, "sha256": p.sha256, "split": p.split} for p in pins},
        "held_out": sorted(held_out),
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
    ordered = sorted(pins, key=lambda p: (SPLITS.index(p.split), p.name))
    functions = {}
    for pin in ordered:
        source = unpack_sources(fetch_wheel(pin, cache), cache / "src" / pin.sha256[:16])
        functions[pin.name] = extract_functions(source, prefix=f"{pin.name}/")
    logger.info("PyPI pairs: holding out %s", ", ".join(sorted(held_out)))
    kept, counts = _distinct(functions, _held_out_keys(held_out))
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
    for split, n in (("dev", n_dev), ("test", n_test)):
        if by_split[split]:
            pool = [f for p in ordered if p.split == split for f in functions[p.name]]
            queries = sample_functions(by_split[split], n, seed, split)
            sizes |= {
                f"{split}_{k}": v
                for k, v in write_beir(paths[split], {split: queries}, pool, corpus_size, seed).items()
            }
    manifest = {
        "key": key,
        "sizes": sizes,
        "per_package": {p.name: {"split": p.split, "file": p.file, **counts[p.name]} for p in ordered},
        "sha256_train_pairs": hashlib.sha256(text.encode("utf-8")).hexdigest(),
        "description": "see text_retrieval/data/bundled/pypi_pairs.py",
        "provenance": provenance(),
    }
    write_text_atomic(paths["manifest"], json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    logger.info("PyPI pairs: %s", ", ".join(f"{k} {v:,}" for k, v in sizes.items()))
    return paths


@dataclass
class PypiPairsCommand:
    """ROOT: the output folder; ``cache``: where the wheels and their unpacked sources are kept;
    ``pins``: the pin file (unset: ``pypi_pins.json`` beside this module). The dev and test sets are
    sized for evaluation on CPUs: the dev set is read at every evaluated checkpoint."""

    root: str = ""
    cache: str = "runs/data/pypi-wheels"
    pins: str | None = None
    n_dev: PositiveInt = 200
    n_test: PositiveInt = 300
    corpus_size: PositiveInt = 1000
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
