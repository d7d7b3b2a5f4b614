"""Writing a built training set: ``pairs.jsonl``, its shards, a BEIR-layout dev folder and manifests.

The MS MARCO builders (``msmarco.py``, ``msmarco_passage.py``) differ in where their pairs and dev
queries come from, not in what they leave on disk, so the layout lives here once:

* ``pairs.jsonl``: one ``{"query_id", "query", "positive", "negatives"}`` per line, in source order;
* ``shards/``: the same samples shuffled with the build seed and written by
  :func:`text_retrieval.data.training.shards.write_text_shards` - byte for byte what
  ``make_text_shards.py shards --jsonl pairs.jsonl --seed SEED`` writes from that file;
* ``dev/``: ``corpus.jsonl``, ``queries.jsonl``, ``qrels/dev.tsv`` (what ``load_beir`` reads), sorted
  by id, with ``manifest.json`` recording the sample sizes and the seed;
* ``manifest.json`` beside them: source, revision, selection rule and every count.

Passages of MS MARCO v1.1 have no ids, so a passage is named by its text (:func:`passage_id`): the
same text under two queries is one corpus document.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clipmag.results.provenance import provenance
from clipmag.storage.files import replace_on_success, sha256_of, write_text_atomic
from clipmag.storage.folder_lock import FolderLock
from text_retrieval.data.training.pairs import shuffled
from text_retrieval.data.training.shards import write_text_shards

logger = logging.getLogger("clipmag")

__all__ = [
    "MANIFEST",
    "passage_id",
    "sha256_of",
    "sample_ids",
    "keep_first_pairs",
    "write_jsonl",
    "write_manifest",
    "write_training_set",
    "write_beir_dev",
    "write_training_manifest",
    "BuildOptions",
    "DEFAULT_BUILD",
    "write_built_set",
]

MANIFEST = "manifest.json"


def passage_id(text: str) -> str:
    """A stable id for a passage that has none: the first 16 hex digits of its text's SHA-1."""
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


def sample_ids(ids: Sequence[str], n: int, seed: int, what: str) -> list[str]:
    """``n`` of ``ids`` drawn with ``random.Random(seed)``; fewer available than asked is an error."""
    if n < 1:
        raise ValueError(f"{what}: the sample size must be >= 1, got {n}")
    if n > len(ids):
        raise ValueError(f"{what}: asked for {n}, but the source holds only {len(ids)}")
    return random.Random(seed).sample(list(ids), n)


def keep_first_pairs(candidates: Iterable[dict[str, Any] | str], unit: str) -> tuple[list[dict[str, Any]], Counter]:
    """The pairs among ``candidates`` (each a pair, or the reason one was left out) that do not repeat
    an earlier (query, positive), with the counts of candidates read (as ``unit``), of each reason a
    candidate was left out (``duplicate_pair`` among them) and of pairs kept."""
    pairs, counts, seen = [], Counter(), set()
    for candidate in candidates:
        counts[unit] += 1
        if not isinstance(candidate, str) and (candidate["query"], candidate["positive"]) in seen:
            candidate = "duplicate_pair"
        if isinstance(candidate, str):
            counts[candidate] += 1
            continue
        seen.add((candidate["query"], candidate["positive"]))
        pairs.append(candidate)
    counts["pairs"] = len(pairs)
    return pairs, counts


def write_jsonl(path: str | Path, records: Iterable[Mapping[str, Any]]) -> int:
    """Write one JSON object per line, atomically; returns the number of lines."""
    count = 0
    with replace_on_success(path) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as fh:
        for record in records:
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
            count += 1
    return count


def write_manifest(path: str | Path, manifest: Mapping[str, Any]) -> Path:
    """``manifest`` as indented JSON at ``path``, atomically, with the code and command that built it."""
    manifest = {**manifest, "provenance": provenance()}
    return write_text_atomic(path, json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")


def write_training_set(
    out: str | Path, pairs: Sequence[Mapping[str, Any]], seed: int, samples_per_shard: int, overwrite: bool
) -> dict[str, Any]:
    """``pairs.jsonl`` in source order and ``shards/`` shuffled with ``seed``; returns what it wrote.

    Existing shards are an error unless ``overwrite`` (checked before ``pairs.jsonl`` is replaced).
    """
    out = Path(out)
    shard_dir = out / "shards"
    if not overwrite and any(shard_dir.glob("shard-*.tar")):
        raise FileExistsError(f"{shard_dir} already holds shards; pass --overwrite to rebuild them")
    write_jsonl(out / "pairs.jsonl", pairs)
    samples = [{"query": p["query"], "positive": p["positive"], "negatives": list(p["negatives"])} for p in pairs]
    paths = write_text_shards(shuffled(samples, seed), shard_dir, samples_per_shard, overwrite=True)
    return {
        "pairs_file": "pairs.jsonl",
        "pairs": len(pairs),
        "shards": {"folder": "shards", "count": len(paths), "samples_per_shard": samples_per_shard, "seed": seed},
    }


def write_beir_dev(
    folder: str | Path,
    queries: Mapping[str, str],
    corpus: Mapping[str, str],
    qrels: Mapping[str, Mapping[str, int]],
    info: Mapping[str, Any],
) -> dict[str, Any]:
    """A BEIR folder with split ``dev`` (everything sorted by id) and its ``manifest.json``."""
    folder = Path(folder)
    unknown = sorted({d for judged in qrels.values() for d in judged} - set(corpus))
    if unknown or set(qrels) - set(queries):
        raise ValueError(f"{folder}: dev judgments name passages or queries it does not hold: {unknown[:3]}")
    write_jsonl(folder / "corpus.jsonl", ({"_id": i, "title": "", "text": corpus[i]} for i in sorted(corpus)))
    write_jsonl(folder / "queries.jsonl", ({"_id": q, "text": queries[q]} for q in sorted(queries)))
    rows = [f"{q}\t{d}\t{gain}\n" for q in sorted(qrels) for d, gain in sorted(qrels[q].items())]
    write_text_atomic(folder / "qrels" / "dev.tsv", "query-id\tcorpus-id\tscore\n" + "".join(rows))
    manifest = {
        **info,
        "queries": len(queries),
        "judgments": len(rows),
        "corpus": len(corpus),
        "files": ["corpus.jsonl", "queries.jsonl", "qrels/dev.tsv"],
    }
    write_manifest(folder / MANIFEST, manifest)
    logger.info("dev subset %s: %d queries, %d passages", folder, len(queries), len(corpus))
    return manifest


def write_training_manifest(
    out: Path, described: Mapping[str, Any], counts: Counter, written: Mapping[str, Any], dev: Mapping[str, Any]
) -> dict[str, Any]:
    """``out/manifest.json`` of a built training set: what it is and where it came from
    (``described``), the builder's counts, the pairs and shards written and the dev subset."""
    manifest = {
        **described,
        "counts": dict(counts),
        **written,
        "dev": {"folder": "dev", **{k: dev[k] for k in ("queries", "judgments", "corpus", "seed")}},
    }
    write_manifest(out / MANIFEST, manifest)
    return manifest


@dataclass(frozen=True)
class BuildOptions:
    """How an MS MARCO builder writes its set: the seed (shard order and dev sample), the dev
    subset's queries and corpus size, the samples per shard, and whether to replace existing shards."""

    seed: int = 0
    dev_queries: int = 500
    dev_corpus: int = 50_000
    samples_per_shard: int = 1000
    overwrite: bool = False


DEFAULT_BUILD = BuildOptions()


def write_built_set(
    out: Path,
    pairs: Sequence[Mapping[str, Any]],
    counts: Counter,
    dev: tuple[Mapping[str, str], Mapping[str, str], Mapping[str, Mapping[str, int]], Mapping[str, Any]],
    described: Mapping[str, Any],
    options: BuildOptions,
) -> dict[str, Any]:
    """Everything a builder leaves in ``out``, in order: ``pairs.jsonl`` and ``shards/`` (existing
    shards refused before anything is written, unless ``options.overwrite``), ``dev/`` from ``dev``
    (queries, corpus, qrels, what was drawn) and ``manifest.json``; returns the manifest. The folder's
    lock is held throughout: a second builder into ``out`` stops at once, naming this one."""
    with FolderLock(out, "training set build"):
        written = write_training_set(out, pairs, options.seed, options.samples_per_shard, options.overwrite)
        dev_manifest = write_beir_dev(out / "dev", *dev)
        return write_training_manifest(out, described, counts, written, dev_manifest)
