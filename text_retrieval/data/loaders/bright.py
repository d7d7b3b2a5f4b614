"""BRIGHT (reasoning-intensive retrieval) from local files: standard, long-document and reasoning-query settings.

One task per folder, as :func:`text_retrieval.data.fetch.download_bright` writes it from the
public ``xlangai/BRIGHT`` release:

* ``examples.jsonl``: ``{"id", "query", "gold_ids", "gold_ids_long", "excluded_ids"}`` per line;
* ``<config>.jsonl`` per reasoning-query config (e.g. ``gpt4_reason.jsonl``): the same fields, with
  ``query`` holding an LLM's reasoning about the question;
* ``documents.jsonl`` and, for the 7 StackExchange tasks and pony, ``long_documents.jsonl``:
  ``{"id", "content"}`` per line (the long setting scores against ``gold_ids_long``);
* ``bright_source.json``: the hub repository and revision the files came from (recorded in results).

The protocol is the official ``run.py``'s: every gold id has gain 1, each query's ``excluded_ids``
leave the ranking before scoring (``"N/A"`` means none), and hits whose id equals the query id are
kept (BRIGHT's ids live in separate namespaces). A gold id missing from the corpus stays in the
judgments, as in the official code (it can never be retrieved, so it lowers the score), with a
warning and a count; ``strict`` makes it an error. An example with no gold ids at all is skipped,
which is what pytrec_eval does with it in the official mean.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clipmag.storage.user_files import check_inside, read_utf8
from text_retrieval.data.loaders.beir import RetrievalDataset
from text_retrieval.data.loaders.eval_settings import REASONING_CONFIGS, EvalSettings
from text_retrieval.data.loaders.reading import DataFormatError, find_file, iter_jsonl, preview, require_str

logger = logging.getLogger("clipmag")

__all__ = [
    "BRIGHT_REPO",
    "BRIGHT_REVISION",
    "BRIGHT_TASKS",
    "LONG_DOCUMENT_TASKS",
    "REASONING_CONFIGS",
    "SOURCE_FILE",
    "BrightDataset",
    "is_bright_folder",
    "load_bright",
    "load_bright_collection",
]

BRIGHT_REPO = "xlangai/BRIGHT"
# The dataset on the hub has been corrected and re-uploaded; this is the revision MTEB's BRIGHT tasks pin.
BRIGHT_REVISION = "3066d29c9651a576c8aba4832d249807b181ecae"
BRIGHT_TASKS = (
    "biology",
    "earth_science",
    "economics",
    "psychology",
    "robotics",
    "stackoverflow",
    "sustainable_living",
    "leetcode",
    "pony",
    "aops",
    "theoremqa_questions",
    "theoremqa_theorems",
)
LONG_DOCUMENT_TASKS = (*BRIGHT_TASKS[:7], "pony")  # the StackExchange tasks and pony
SOURCE_FILE = "bright_source.json"
_EXAMPLE_FILES = ("examples.jsonl", "examples.jsonl.gz")
_SHORT_FILES = ("documents.jsonl", "documents.jsonl.gz")
_LONG_FILES = ("long_documents.jsonl", "long_documents.jsonl.gz")
_DOCUMENT_FILES = (*_SHORT_FILES, *_LONG_FILES)


@dataclass
class BrightDataset(RetrievalDataset):
    """One BRIGHT task in one setting, with where it came from; ``settings`` travel with it when a
    settings file selected it, so every evaluator (the trainer's test phase too) applies them."""

    task: str = ""
    long_documents: bool = False
    reasoning: str | None = None
    revision: str | None = None
    missing_gold: int = 0
    strict: bool = False
    settings: EvalSettings | None = None

    @property
    def suite(self) -> str:
        """The name shared by every task of this setting (the report averages over it)."""
        suite = "bright" + ("-long" if self.long_documents else "") + (f"-{self.reasoning}" if self.reasoning else "")
        return suite + (f"@{self.settings.name}" if self.settings and self.settings.name else "")

    def describe(self) -> dict[str, Any]:
        """Provenance written into every result: setting, data revision and the missing-gold count."""
        return {
            "kind": "bright",
            "suite": self.suite,
            "task": self.task,
            "long_documents": self.long_documents,
            "reasoning": self.reasoning,
            "revision": self.revision,
            "missing_gold_ids": self.missing_gold,
            "strict": self.strict,
        }


def is_bright_folder(path: str | Path) -> bool:
    """A task folder: examples plus documents of either kind (a long-setting download has no short ones)."""
    path = Path(path)
    return (
        path.is_dir() and find_file(path, *_EXAMPLE_FILES) is not None and find_file(path, *_DOCUMENT_FILES) is not None
    )


def _id_list(obj: dict[str, Any], key: str, path: Path, line: int, required: bool) -> list[str]:
    if key not in obj or obj[key] is None:
        if required:
            raise DataFormatError(path, line, f"a {key!r} list", f"keys {sorted(obj)}")
        return []
    value = obj[key]
    if not isinstance(value, list) or not all(isinstance(v, (str, int)) for v in value):
        raise DataFormatError(path, line, f"{key!r} to be a list of ids", preview(value))
    return [str(v) for v in value if str(v) != "N/A"]


def _read_revision(folder: Path) -> str | None:
    path = folder / SOURCE_FILE
    if not path.is_file():
        return None
    text = read_utf8(check_inside(path, folder))
    try:
        return json.loads(text)["revision"]
    except (json.JSONDecodeError, KeyError, TypeError):
        raise DataFormatError(path, None, 'a JSON object with a "revision"', preview(text)) from None


def _read_corpus(folder: Path, stem: str) -> tuple[Path, list[str], list[str]]:
    docs_path = find_file(folder, f"{stem}.jsonl", f"{stem}.jsonl.gz")
    if docs_path is None:
        hint = f" (BRIGHT has long documents for {', '.join(LONG_DOCUMENT_TASKS)})" if stem == "long_documents" else ""
        raise FileNotFoundError(f"{folder}: no {stem}.jsonl{hint}")
    ids: list[str] = []
    texts: list[str] = []
    for number, obj in iter_jsonl(docs_path):
        ids.append(require_str(obj, "id", docs_path, number, allow_empty=False))
        texts.append(require_str(obj, "content", docs_path, number))
    if not ids:
        raise DataFormatError(docs_path, None, 'at least one document ({"id", "content"} per line)', "an empty file")
    return docs_path, ids, texts


def load_bright(
    path: str | Path, long_documents: bool = False, reasoning: str | None = None, strict: bool = False
) -> BrightDataset:
    """Load one BRIGHT task folder: documents or long documents, plain or reasoning queries."""
    folder = Path(path)
    if reasoning is not None and reasoning not in REASONING_CONFIGS:
        raise ValueError(f"unknown BRIGHT reasoning config {reasoning!r}; valid: {', '.join(REASONING_CONFIGS)}")
    examples_path = find_file(folder, f"{reasoning}.jsonl") if reasoning else find_file(folder, *_EXAMPLE_FILES)
    if examples_path is None and reasoning:
        fetch = f"python -m text_retrieval.data.download bright {folder.parent} --reasoning {reasoning}"
        raise FileNotFoundError(f"{folder}: no {reasoning}.jsonl (reasoning queries; fetch them with {fetch})")
    if examples_path is None:
        raise FileNotFoundError(f"{folder}: a BRIGHT task folder needs examples.jsonl")
    docs_path, corpus_ids, corpus_texts = _read_corpus(folder, "long_documents" if long_documents else "documents")
    known = set(corpus_ids)

    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    excluded: dict[str, set[str]] = {}
    missing: list[str] = []
    gold_key = "gold_ids_long" if long_documents else "gold_ids"
    for number, obj in iter_jsonl(examples_path):
        qid = require_str(obj, "id", examples_path, number, allow_empty=False)
        if qid in queries:
            raise DataFormatError(examples_path, number, f"a unique 'id' ({qid!r} repeats)")
        text = require_str(obj, "query", examples_path, number, allow_empty=False)
        gold = _id_list(obj, gold_key, examples_path, number, required=True)
        absent = [d for d in gold if d not in known]
        if absent and strict:
            raise DataFormatError(
                examples_path, number, f"gold ids present in {docs_path.name}", f"missing {absent[:5]}"
            )
        missing += absent
        if not gold:
            if strict:
                raise DataFormatError(examples_path, number, f"at least one id in {gold_key!r}", "none")
            continue
        skip = set(_id_list(obj, "excluded_ids", examples_path, number, required=False))
        clash = skip.intersection(gold)
        if clash:
            raise DataFormatError(
                examples_path, number, "excluded_ids disjoint from the gold ids", f"both: {sorted(clash)[:5]}"
            )
        queries[qid] = text
        qrels[qid] = {d: 1 for d in gold}
        if skip:
            excluded[qid] = skip
    if not queries:
        raise DataFormatError(examples_path, None, f'at least one example ({{"id", "query", "{gold_key}"}})', "none")
    if missing:
        logger.warning(
            "%s: %d gold id(s) missing from %s kept in the judgments, as in the official evaluation (e.g. %s)",
            examples_path,
            len(missing),
            docs_path.name,
            missing[:3],
        )
    logger.info("loaded BRIGHT %s: %d docs, %d queries", folder.name, len(corpus_ids), len(queries))
    return BrightDataset(
        name=f"bright-{folder.name}" + ("-long" if long_documents else "") + (f"-{reasoning}" if reasoning else ""),
        corpus_ids=corpus_ids,
        corpus_texts=corpus_texts,
        queries=queries,
        qrels=qrels,
        excluded=excluded,
        ignore_identical_ids=False,
        kind="bright",
        split="test",
        source=str(folder.resolve()),
        task=folder.name,
        long_documents=long_documents,
        reasoning=reasoning,
        revision=_read_revision(folder),
        missing_gold=len(missing),
        strict=strict,
    )


def _looks_like_task(path: Path) -> bool:
    """A folder meant as a BRIGHT task: named like one, or holding any file a BRIGHT download writes."""
    names = (*_EXAMPLE_FILES, *_DOCUMENT_FILES, SOURCE_FILE, *(f"{config}.jsonl" for config in REASONING_CONFIGS))
    return path.is_dir() and (path.name in BRIGHT_TASKS or find_file(path, *names) is not None)


def _missing_files(folder: Path, long_documents: bool, reasoning: str | None) -> list[str]:
    """The files of the setting that the task folder lacks."""
    examples = (f"{reasoning}.jsonl",) if reasoning else _EXAMPLE_FILES
    documents = _LONG_FILES if long_documents else _SHORT_FILES
    return [choices[0] for choices in (examples, documents) if find_file(folder, *choices) is None]


def load_bright_collection(
    root: str | Path, long_documents: bool = False, reasoning: str | None = None, strict: bool = False
) -> list[BrightDataset]:
    """Every task folder under ``root``; the long setting takes the tasks that have long documents.

    Tasks absent altogether are a subset chosen at download (``--tasks``); a task folder that lacks
    a file of the setting is an error naming it, since averaging over the others would silently
    change what the BRIGHT mean means. The long setting leaves out the tasks BRIGHT has no long
    documents for.
    """
    folders = [p for p in sorted(Path(root).iterdir()) if _looks_like_task(p)]
    if long_documents:
        skipped = [p.name for p in folders if p.name not in LONG_DOCUMENT_TASKS and find_file(p, *_LONG_FILES) is None]
        if skipped:
            logger.info("BRIGHT long setting: %s have no long documents and are not evaluated", ", ".join(skipped))
        folders = [p for p in folders if p.name not in skipped]
        if not folders:
            raise FileNotFoundError(
                f"{root}: no task folder has long_documents.jsonl (fetch them: "
                f"python -m text_retrieval.data.download bright {root} --long-documents)"
            )
    missing = {p.name: _missing_files(p, long_documents, reasoning) for p in folders}
    missing = {task: files for task, files in missing.items() if files}
    if missing:
        listed = "; ".join(f"{task} lacks {', '.join(files)}" for task, files in missing.items())
        options = " --long-documents" * long_documents + (f" --reasoning {reasoning}" if reasoning else "")
        fetch = f"python -m text_retrieval.data.download bright {root} --tasks {' '.join(missing)}{options}"
        raise FileNotFoundError(
            f"{root}: incomplete BRIGHT task folder(s): {listed}. Fetch them ({fetch}) or move those folders out "
            f"of {root} to evaluate the other {len(folders) - len(missing)} task(s) alone"
        )
    return [load_bright(p, long_documents, reasoning, strict) for p in folders]
