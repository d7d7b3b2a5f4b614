"""MS MARCO 500K: the paper's larger training set, from the passage-ranking judgments in BEIR layout.

The paper names its extension "the MS MARCO passage judged subset, 502,939 queries": the number of
train queries judged in the passage-ranking qrels as BEIR distributes them (``msmarco.zip``:
``corpus.jsonl`` with 8.8M passages, ``queries.jsonl``, ``qrels/train.tsv``, ``qrels/dev.tsv``).
So the 500K set is built from that folder, not from MS MARCO v2.1 QA. Rule:

1. one pair per query of ``qrels/train.tsv`` with a judgment of score > 0: its first such passage in
   file order (the text ``title + " " + text``, as ``load_beir`` joins it);
2. no negatives (the judgments name none; in-batch negatives only, as the paper trains);
3. a pair whose (query, positive) texts equal an earlier one's, or whose query or passage is
   missing or empty, is dropped and counted by reason in ``manifest.json``.

The dev subset is a seeded sample of the judged queries of ``qrels/dev.tsv`` (disjoint from train,
unlike MS MARCO v1.1's validation queries, which may recur in the passage-ranking train set), their
judged passages, and seeded distractors drawn uniformly by line from the rest of the corpus.
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from pathlib import Path
from typing import Any

from text_retrieval.data.loaders.beir import read_qrels
from text_retrieval.data.loaders.reading import find_file, iter_jsonl, open_text, require_str
from text_retrieval.data.training.write import (
    DEFAULT_BUILD,
    BuildOptions,
    keep_first_pairs,
    sample_ids,
    sha256_of,
    write_built_set,
)

logger = logging.getLogger("clipmag")

__all__ = ["RULE", "build_msmarco500k"]

RULE = (
    "one pair per query of qrels/train.tsv with a judgment of score > 0: its first such passage in file order; "
    "no negatives; pairs repeating an earlier (query, positive), or with a missing or empty text, are dropped"
)


def _files(folder: Path) -> dict[str, Path]:
    found = {
        "corpus": find_file(folder, "corpus.jsonl", "corpus.jsonl.gz"),
        "queries": find_file(folder, "queries.jsonl", "queries.jsonl.gz"),
        "train": find_file(folder / "qrels", "train.tsv"),
        "dev": find_file(folder / "qrels", "dev.tsv"),
    }
    missing = [name for name, path in found.items() if path is None]
    if missing:
        raise FileNotFoundError(
            f"{folder}: missing {', '.join(missing)} (expected BEIR's msmarco folder: corpus.jsonl, queries.jsonl, "
            "qrels/train.tsv, qrels/dev.tsv)"
        )
    return found  # type: ignore[return-value]


def _line_count(path: Path) -> int:
    with open_text(path) as handle:
        return sum(1 for _ in handle)


def _read_texts(path: Path, wanted: set[str], lines: set[int]) -> tuple[dict[str, str], dict[int, tuple[str, str]]]:
    """One pass over a BEIR jsonl: the texts of the ``wanted`` ids, and ``(id, text)`` at ``lines``."""
    texts, at_lines = {}, {}
    for number, obj in iter_jsonl(path):
        doc_id = require_str(obj, "_id", path, number, allow_empty=False)
        if doc_id in wanted or number in lines:
            title = obj.get("title") or ""
            text = require_str(obj, "text", path, number)
            joined = (title + " " + text).strip() if isinstance(title, str) and title else text.strip()
            if doc_id in wanted:
                texts[doc_id] = joined
            if number in lines:
                at_lines[number] = (doc_id, joined)
    return texts, at_lines


def _train_pairs(
    positives: dict[str, str], queries: dict[str, str], passages: dict[str, str]
) -> tuple[list[dict[str, Any]], Counter]:
    def candidate(qid: str, doc_id: str) -> dict[str, Any] | str:
        query, positive = queries.get(qid, ""), passages.get(doc_id, "")
        if not (query and positive):
            return "missing_or_empty_text"
        return {"query_id": qid, "query": query, "positive": positive, "negatives": []}

    pairs, counts = keep_first_pairs((candidate(q, d) for q, d in positives.items()), "queries")
    if counts["missing_or_empty_text"]:
        logger.warning("MS MARCO 500K: %d judged queries left out for a missing text", counts["missing_or_empty_text"])
    return pairs, counts


def _first_positives(path: Path) -> dict[str, str]:
    """Query id -> its first passage of score > 0 in file order, for the queries that have one."""
    positives = {}
    for qid, judged in read_qrels(path).items():
        relevant = [d for d, gain in judged.items() if gain > 0]
        if relevant:
            positives[qid] = relevant[0]
    return positives


def _sample_dev(path: Path, n_queries: int, seed: int) -> dict[str, dict[str, int]]:
    """``n_queries`` seeded judged queries of ``qrels/dev.tsv`` with their relevant passages."""
    dev = {q: {d: g for d, g in judged.items() if g > 0} for q, judged in read_qrels(path).items()}
    chosen = sample_ids([q for q in dev if dev[q]], n_queries, seed, f"dev queries ({path})")
    return {q: dev[q] for q in chosen}


def build_msmarco500k(source: str | Path, out: str | Path, options: BuildOptions = DEFAULT_BUILD) -> dict[str, Any]:
    """Build ``out/pairs.jsonl``, ``out/shards/``, ``out/dev/`` and ``out/manifest.json`` from BEIR's
    ``msmarco`` folder ``source``; returns the manifest.

    Two passes over the corpus (a line count, then the texts): only the positives, the dev passages
    and the drawn distractor lines are held in memory.
    """
    source, out = Path(source), Path(out)
    files = _files(source)
    positives = _first_positives(files["train"])
    dev_qrels = _sample_dev(files["dev"], options.dev_queries, options.seed)
    judged = {d for docs in dev_qrels.values() for d in docs}
    wanted = max(0, options.dev_corpus - len(judged))
    n_lines = _line_count(files["corpus"])
    candidates = random.Random(options.seed).sample(range(1, n_lines + 1), min(n_lines, wanted + len(judged)))
    passages, at_lines = _read_texts(files["corpus"], set(positives.values()) | judged, set(candidates))
    queries, _ = _read_texts(files["queries"], set(positives) | set(dev_qrels), set())
    missing = sorted(judged - set(passages)) + sorted(set(dev_qrels) - set(queries))
    if missing:
        raise ValueError(f"{source}: dev judgments name ids missing from corpus.jsonl/queries.jsonl: {missing[:3]}")
    pairs, counts = _train_pairs(positives, queries, passages)
    if not pairs:
        raise ValueError(f"{source}: no judged train query with both texts present")
    drawn = dict.fromkeys(at_lines[n] for n in candidates if n in at_lines and at_lines[n][0] not in judged)
    distractors = dict(list(drawn)[:wanted])
    corpus = {**{d: passages[d] for d in judged}, **distractors}
    info = {"source": "BEIR msmarco", "split": "dev", "seed": options.seed, "distractors": len(distractors)}
    described = {
        "dataset": "MS MARCO 500K (MS MARCO passage ranking, judged train queries, BEIR layout)",
        "source": str(source.resolve()),
        "files": {str(p.relative_to(source)): sha256_of(p) for p in files.values()},
        "rule": RULE,
    }
    dev = ({q: queries[q] for q in dev_qrels}, corpus, dev_qrels, info)
    manifest = write_built_set(out, pairs, counts, dev, described, options)
    logger.info("MS MARCO 500K: %d pairs from %d judged train queries -> %s", len(pairs), counts["queries"], out)
    return manifest
