"""Docstring -> code pairs from a pinned list of installed packages: a large offline pair set that is
not the fine-tuning data, for continued pretraining (e.g. making a cosine encoder dot-native).

``build_package_pairs(root, packages)`` writes under ``root``:

``pairs.jsonl`` and ``shards/``
    One ``{"query", "positive", "doc_id"}`` per function of the named packages with a usable
    docstring summary (the extraction rules of :mod:`text_retrieval.data.bundled.extract`), read in the
    given package order, shuffled with ``seed`` and cut to ``max_pairs``.
``manifest.json``
    Python version, each package's distribution and version, pairs per package, what was dropped
    and why, and the sha256 of ``pairs.jsonl``. A later call with the same settings and versions
    returns at once; anything else rebuilds.

The evaluation and fine-tuning trees are held out: by default the standard library and
scikit-learn, whose functions make the bundled code-search train and test sets and the tests'
data. A held-out tree named as a package is an error, and a pair is dropped when its code
(whitespace-normalised) or its summary (case-folded) occurs anywhere in a held-out tree, so a copy
vendored into another package cannot leak a test document into pretraining. Summaries shared by
two functions are ambiguous as queries and dropped, as are exact copies of earlier code.

    python -m text_retrieval.data.bundled.package_pairs runs/data/package-pairs --packages numpy scipy sympy
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import random
import sys
import sysconfig
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clipmag.config.checks import PositiveInt
from clipmag.config.command_line import field_flags, parse_cli, require_words
from clipmag.results.provenance import provenance
from clipmag.results.record import installed_versions
from clipmag.runtime.logs import setup_logging
from clipmag.storage.files import write_text_atomic
from text_retrieval.data.bundled.build import STDLIB_EXCLUDED
from text_retrieval.data.bundled.extract import CodeFunction, extract_functions, installed_package_dir
from text_retrieval.data.training.shards import write_text_shards

logger = logging.getLogger("clipmag")

__all__ = [
    "PackagePairsCommand",
    "build_package_pairs",
    "built_with",
    "default_held_out",
    "main",
    "PACKAGE_PAIRS_VERSION",
]

PACKAGE_PAIRS_VERSION = 1  # bump whenever a change alters the files written
SAMPLES_PER_SHARD = 1000


def distribution_version(name: str) -> str:
    """``distribution==version`` of the installed import package ``name`` (``==not installed`` if none)."""
    dist = importlib.metadata.packages_distributions().get(name, [name])[0]
    return f"{dist}=={installed_versions([dist])[dist]}"


def default_held_out() -> dict[str, Path]:
    """The trees the bundled code-search sets come from: the standard library and scikit-learn."""
    return {
        "stdlib": Path(sysconfig.get_paths()["stdlib"]),
        "sklearn": installed_package_dir("sklearn", "package pairs"),
    }


def built_with(manifest: Path, key: Mapping[str, Any]) -> bool:
    """Whether ``manifest`` records a finished build of the same ``key`` (a build writes it last)."""
    if not manifest.is_file():
        return False
    try:
        return json.loads(manifest.read_text(encoding="utf-8")).get("key") == key
    except json.JSONDecodeError:
        return False


def _code_key(fn: CodeFunction) -> str:
    return " ".join(fn.code.split())


def _held_out_keys(trees: Mapping[str, Path]) -> tuple[set[str], set[str]]:
    codes: set[str] = set()
    summaries: set[str] = set()
    for name, tree in trees.items():
        for fn in extract_functions(tree, STDLIB_EXCLUDED if name == "stdlib" else frozenset()):
            codes.add(_code_key(fn))
            if fn.summary:
                summaries.add(fn.summary.casefold())
    return codes, summaries


def _collect(
    packages: Sequence[str], dirs: Mapping[str, Path], held_codes: set[str], held_summaries: set[str]
) -> tuple[list[dict[str, str]], dict[str, dict[str, int]]]:
    """Pairs in package order and per-package counts (kept, dropped as held-out copies, ambiguous)."""
    seen_code: set[str] = set()
    candidates: list[tuple[str, CodeFunction]] = []
    counts: dict[str, dict[str, int]] = {}
    for name in packages:
        row = counts.setdefault(name, {"functions": 0, "held_out_copies": 0, "kept": 0, "ambiguous": 0})
        for fn in extract_functions(dirs[name], prefix=f"{name}/"):
            row["functions"] += 1
            key = _code_key(fn)
            if key in held_codes or (fn.summary and fn.summary.casefold() in held_summaries):
                row["held_out_copies"] += 1
                continue
            if key in seen_code or not fn.summary:
                continue
            seen_code.add(key)
            candidates.append((name, fn))
    summary_count: dict[str, int] = {}
    for _, fn in candidates:
        summary_count[fn.summary.casefold()] = summary_count.get(fn.summary.casefold(), 0) + 1
    pairs = []
    for name, fn in candidates:
        if summary_count[fn.summary.casefold()] > 1:
            counts[name]["ambiguous"] += 1
            continue
        counts[name]["kept"] += 1
        pairs.append({"query": fn.summary, "positive": fn.code, "doc_id": fn.doc_id})
    return pairs, counts


def _jsonl(rows: Iterable[Mapping[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)


def build_package_pairs(
    root: str | Path,
    packages: Sequence[str],
    *,
    max_pairs: int | None = None,
    seed: int = 0,
    held_out: Mapping[str, Path] | None = None,
    package_dirs: Mapping[str, Path] | None = None,
) -> dict[str, Path]:
    """Build (or reuse) the pair set under ``root`` (module docstring); returns ``pairs``, ``shards``,
    ``manifest``. ``held_out`` maps names to source trees kept out (default :func:`default_held_out`);
    ``package_dirs`` replaces the installed packages' folders (tests use small trees)."""
    root = Path(root)
    if not packages:
        raise ValueError("package pairs: name at least one package")
    if max_pairs is not None and max_pairs < 1:
        raise ValueError(f"package pairs: max_pairs must be at least 1, got {max_pairs}")
    held_out = dict(held_out) if held_out is not None else default_held_out()
    overlap = sorted(set(packages) & set(held_out))
    if overlap:
        raise ValueError(f"package pairs: {', '.join(overlap)} is held out (evaluation or fine-tuning data)")
    dirs = {
        name: Path(package_dirs[name]) if package_dirs else installed_package_dir(name, "package pairs")
        for name in packages
    }
    key = {
        "version": PACKAGE_PAIRS_VERSION,
        "python": sys.version.split()[0],
        "packages": {name: distribution_version(name) for name in packages},
        "held_out": {name: str(tree) for name, tree in held_out.items()},
        "max_pairs": max_pairs,
        "seed": seed,
    }
    paths = {"pairs": root / "pairs.jsonl", "shards": root / "shards", "manifest": root / "manifest.json"}
    if built_with(paths["manifest"], key):
        logger.info("package pairs up to date in %s", root)
        return paths
    paths["manifest"].unlink(missing_ok=True)  # absent until the build completes
    logger.info("building package pairs in %s from %s", root, ", ".join(packages))
    pairs, counts = _collect(packages, dirs, *_held_out_keys(held_out))
    random.Random(seed).shuffle(pairs)
    pairs = pairs[:max_pairs] if max_pairs is not None else pairs
    text = _jsonl(pairs)
    write_text_atomic(paths["pairs"], text)
    shards = write_text_shards(pairs, paths["shards"], SAMPLES_PER_SHARD, overwrite=True)
    manifest = {
        "key": key,
        "pairs": len(pairs),
        "shards": len(shards),
        "per_package": counts,
        "sha256_pairs": hashlib.sha256(text.encode("utf-8")).hexdigest(),
        "description": "see text_retrieval/data/bundled/package_pairs.py",
        "provenance": provenance(),
    }
    write_text_atomic(paths["manifest"], json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    logger.info("package pairs: %d pairs in %d shards (sha256 %s)", len(pairs), len(shards), manifest["sha256_pairs"])
    return paths


@dataclass
class PackagePairsCommand:
    """ROOT --packages NAME ...: the output folder (pairs.jsonl, shards/, manifest.json) and the
    installed top-level packages, in order; ``max_pairs`` keeps that many after the seeded shuffle."""

    root: str = ""
    packages: list[str] = field(default_factory=list)
    max_pairs: PositiveInt | None = None
    seed: int = 0


def main(argv: Sequence[str]) -> None:
    """Build the pair set: ``python -m text_retrieval.data.bundled.package_pairs ROOT --packages NAME ...``."""
    cmd = parse_cli(PackagePairsCommand, argv, field_flags(PackagePairsCommand), description=__doc__, positional="root")
    require_words(cmd, ("root", "packages"))
    setup_logging()
    paths = build_package_pairs(cmd.root, cmd.packages, max_pairs=cmd.max_pairs, seed=cmd.seed)
    print(f"package pairs -> {paths['shards']} (manifest {paths['manifest']})")


if __name__ == "__main__":
    from clipmag.config.entry import run_entry_point

    run_entry_point(main)
