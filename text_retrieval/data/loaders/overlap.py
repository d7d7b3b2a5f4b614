"""Whether a validation set is a test set by content: the judged queries (STS: the scored pairs).

Validation picks the checkpoint a run exports, so a validation set that is a test set under another
path (a byte copy, a re-written copy, a subset of it) would tune the reported numbers on the test
data, and a path comparison cannot see that. Each set is read down to its content: a BEIR split's
judged query texts (``queries.jsonl`` joined with ``qrels/<split>.tsv``), a BRIGHT task's example
queries, a pairs file's queries, an STS set's sentence pairs; never a corpus, so the check costs
little before training. A validation set that holds every query of a test set, or whose queries all
lie in one, is refused; one that shares only some is reported (a few repeated queries happen in real
data). A file of training pairs is held to the same rule against every evaluation set: numbers on
pairs the model trained on say nothing of pairs it has not seen.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Mapping
from pathlib import Path

from text_retrieval.data.loaders import detect_kind, load_sts, located
from text_retrieval.data.loaders.beir import read_qrels
from text_retrieval.data.loaders.bright import is_bright_folder
from text_retrieval.data.loaders.eval_settings import read_settings_file
from text_retrieval.data.loaders.pairs import read_pairs
from text_retrieval.data.loaders.reading import find_file, iter_jsonl, require_str

logger = logging.getLogger("clipmag")

__all__ = ["set_contents", "validation_test_overlap", "training_pairs_overlap"]

_HARM = "validation picks the checkpoint, so the test numbers would be tuned on the test set"


def _beir(folder: Path, split: str) -> dict[str, frozenset[str]]:
    qrels_path = folder / "qrels" / f"{split}.tsv"
    queries_path = find_file(folder, "queries.jsonl", "queries.jsonl.gz")
    if not qrels_path.is_file() or queries_path is None:
        return {}  # not this split: the loader names what is missing when the set is read
    judged = read_qrels(qrels_path)
    texts = {}
    for number, obj in iter_jsonl(queries_path):
        qid = require_str(obj, "_id", queries_path, number, allow_empty=False)
        if qid in judged:
            texts[qid] = require_str(obj, "text", queries_path, number)
    return {f"{folder.name}/{split}": frozenset(texts.values())}


def _bright(path: Path) -> dict[str, frozenset[str]]:
    tasks = [path] if is_bright_folder(path) else [p for p in sorted(path.iterdir()) if is_bright_folder(p)]
    found = {}
    for task in tasks:
        examples = find_file(task, "examples.jsonl", "examples.jsonl.gz")
        if examples is not None:
            queries = (require_str(obj, "query", examples, n) for n, obj in iter_jsonl(examples))
            found[f"bright-{task.name}"] = frozenset(queries)
    return found


def set_contents(path: str | Path, split: str) -> dict[str, frozenset[str]]:
    """Each data set at ``path`` (in ``split`` where it has splits) -> its content, as above."""
    path = located(path)
    kind = detect_kind(path)
    if kind == "beir":
        return _beir(path, split)
    if kind == "bright-settings":
        path, _ = read_settings_file(path)
        kind = "bright"
    if kind.startswith("bright"):
        return _bright(path)
    if kind == "pairs":
        return {path.name: frozenset(sample["query"] for sample in read_pairs(path))}
    return {pairs.name: frozenset(f"{a}\t{b}" for a, b in zip(pairs.a, pairs.b)) for pairs in load_sts(path, split)}


def validation_test_overlap(
    validation: Mapping[str, Path], test: Mapping[str, Path], validation_split: str, test_split: str
) -> str | None:
    """The refusal for a validation set that is (in, or around) a test set by content, or None;
    ``validation`` and ``test`` map each setting's spelling to its path. Partial overlaps are logged."""

    def sets(specs: Mapping[str, Path], split: str) -> list[tuple[str, str, frozenset[str]]]:
        return [
            (spec, name, content) for spec, path in specs.items() for name, content in set_contents(path, split).items()
        ]

    pairs = itertools.product(sets(validation, validation_split), sets(test, test_split))
    for (spec, name, content), (test_spec, test_name, test_content) in pairs:
        shared = len(content & test_content)
        if shared and shared in (len(content), len(test_content)):
            return (
                f"data.validation {spec!r} and data.test {test_spec!r} hold the same data by content: {name} and "
                f"{test_name} share {shared} queries ({len(content)} and {len(test_content)} in all); {_HARM}: "
                "validate on other data"
            )
        if shared:
            logger.warning(
                "data.validation %s (%s) and data.test %s (%s) share %d of %d validation queries",
                *(spec, name, test_spec, test_name, shared, len(content)),
            )
    return None


def training_pairs_overlap(
    train: Path, evaluated: Mapping[str, Mapping[str, Path]], splits: Mapping[str, str]
) -> str | None:
    """The refusal for an evaluation set all of whose queries are training queries of the pairs file
    ``train``, or None; ``evaluated`` maps ``validation`` / ``test`` to each setting's spelling and
    path, ``splits`` to their splits. Partial overlaps are logged."""
    trained = frozenset(sample["query"] for sample in read_pairs(train))
    for key, specs in evaluated.items():
        for spec, path in specs.items():
            for name, content in set_contents(path, splits[key]).items():
                shared = len(content & trained)
                if shared and shared == len(content):
                    return (
                        f"data.{key} {spec!r}: all {shared} of its queries ({name}) are training queries of "
                        f"data.train {str(train)!r}, so its numbers would score pairs the model trained on: "
                        "hold some pairs out in a file of their own"
                    )
                if shared:
                    logger.warning(
                        "data.%s %s (%s) shares %d of %d queries with data.train %s",
                        *(key, spec, name, shared, len(content), train),
                    )
    return None
