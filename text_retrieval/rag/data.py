"""Passage corpora and QA sets for RAG evaluation, read the way their publishers read them.

Corpora (``read_corpus``):

* DPR's ``psgs_w100.tsv`` layout, ``id<TAB>text<TAB>title`` with an optional ``id text title``
  header, read with ``csv`` and a tab delimiter as DPR does (quoted fields may hold tabs);
* BEIR's ``corpus.jsonl[.gz]`` (``{"_id", "title", "text"}``);
* a folder holding one of those (``passages.tsv`` written by the bundled builder, ``psgs_w100.tsv``,
  ``corpus.jsonl``).

QA sets (``read_qa``):

* DPR's NQ-open / TriviaQA files: ``question<TAB>answer-list`` where the list is a Python literal,
  read with ``csv`` (plain tab splitting breaks on 15 TriviaQA lines whose quoted fields hold
  doubled quotes);
* JSON lines ``{"question", "answer": [...]}`` (SQuAD-open, WebQuestions, CuratedTREC; ``answers``
  and an optional ``id`` are accepted too);
* a JSON array of ``{"question", "answer"}`` objects (HotpotQA's own release, one answer string).

Files are split on ``\\n`` only: some questions contain Unicode line separators. Bad input raises
:class:`~text_retrieval.data.loaders.reading.DataFormatError` naming the file, the line and what was
expected; duplicate passage ids name both lines.
"""

from __future__ import annotations

import ast
import csv
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from text_retrieval.data.loaders.reading import (
    DataFormatError,
    find_file,
    iter_jsonl,
    open_text,
    parse_json_lines,
    preview,
    require_str,
)
from text_retrieval.rag.answers import MatchType

__all__ = ["Passage", "Corpus", "Question", "QASet", "read_corpus", "read_qa", "CORPUS_FILES"]

CORPUS_FILES = ("passages.tsv", "psgs_w100.tsv", "psgs_w100.tsv.gz", "corpus.jsonl", "corpus.jsonl.gz")
csv.field_size_limit(1 << 30)


@dataclass(frozen=True)
class Passage:
    """One retrievable unit; the dense retriever and BM25 see ``title + " " + text``."""

    id: str
    title: str
    text: str

    @property
    def retrieval_text(self) -> str:
        return f"{self.title} {self.text}".strip()


@dataclass
class Corpus:
    """Passages in file order with an id index."""

    name: str
    passages: list[Passage]
    source: str = ""

    def __post_init__(self) -> None:
        self.position = {p.id: i for i, p in enumerate(self.passages)}

    def __len__(self) -> int:
        return len(self.passages)


@dataclass(frozen=True)
class Question:
    """A question with its gold answers (aliases, or regular expressions for CuratedTREC)."""

    id: str
    text: str
    answers: tuple[str, ...]
    match: MatchType = "string"
    source: str = ""


@dataclass
class QASet:
    """Questions of one file; each question's ``match`` says how its answers are compared."""

    name: str
    questions: list[Question]
    source: str = ""

    def __len__(self) -> int:
        return len(self.questions)


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(line_number, line)`` split on ``\\n`` only (CR of CRLF endings removed)."""
    number, pending = 0, ""
    with open_text(path) as handle:
        for chunk in iter(lambda: handle.read(1 << 20), ""):
            *complete, pending = (pending + chunk).split("\n")
            for line in complete:
                number += 1
                yield number, line.rstrip("\r")
    if pending:
        yield number + 1, pending.rstrip("\r")


def _add(passages: list[Passage], seen: dict[str, int], passage: Passage, path: Path, line: int) -> None:
    if not passage.id:
        raise DataFormatError(path, line, "a non-empty passage id", "an empty id")
    if passage.id in seen:
        raise DataFormatError(
            path, line, "unique passage ids", f"id {passage.id!r} again (first on line {seen[passage.id]})"
        )
    seen[passage.id] = line
    passages.append(passage)


def _read_dpr_corpus(path: Path) -> list[Passage]:
    passages: list[Passage] = []
    seen: dict[str, int] = {}
    reader = csv.reader((line + "\n" for _, line in _lines(path)), delimiter="\t")
    for row in reader:
        line = reader.line_num
        if not row or (len(row) == 1 and not row[0].strip()):
            continue
        if line == 1 and [c.strip().lower() for c in row] == ["id", "text", "title"]:
            continue
        if len(row) != 3:
            raise DataFormatError(path, line, "3 tab-separated fields (id, text, title)", f"{len(row)} fields")
        _add(passages, seen, Passage(row[0].strip(), row[2], row[1]), path, line)
    return passages


def _read_beir_corpus(path: Path) -> list[Passage]:
    passages: list[Passage] = []
    seen: dict[str, int] = {}
    for line, obj in iter_jsonl(path):
        title = obj.get("title") or ""
        passage = Passage(require_str(obj, "_id", path, line), str(title), require_str(obj, "text", path, line))
        _add(passages, seen, passage, path, line)
    return passages


def read_corpus(path: str | Path) -> Corpus:
    """Passages from a DPR tsv, a BEIR ``corpus.jsonl`` or a folder holding one of them."""
    path = Path(path)
    if path.is_dir():
        found = find_file(path, *CORPUS_FILES)
        if found is None:
            raise FileNotFoundError(f"{path}: no passage file; expected one of {', '.join(CORPUS_FILES)}")
        path = found
    if not path.is_file():
        raise FileNotFoundError(f"passage corpus not found: {path}")
    name = path.name.split(".")[0]
    passages = _read_beir_corpus(path) if ".jsonl" in path.name else _read_dpr_corpus(path)
    if not passages:
        raise DataFormatError(path, None, "at least one passage", "none")
    return Corpus(
        name=name if name not in ("passages", "corpus") else path.parent.name, passages=passages, source=str(path)
    )


def _answer_list(value: Any, path: Path, line: int) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(a, str) for a in value):
        raise DataFormatError(path, line, "a non-empty list of answer strings", preview(value))
    return tuple(value)


def _question(obj: Any, path: Path, line: int, default_id: str, match: str) -> Question:
    if not isinstance(obj, dict):
        raise DataFormatError(path, line, 'a JSON object {"question", "answer"}', type(obj).__name__)
    text = require_str(obj, "question", path, line, allow_empty=False)
    key = "answer" if "answer" in obj else "answers"
    if key not in obj:
        raise DataFormatError(path, line, "an 'answer' field", f"keys {sorted(obj)}")
    qid = str(obj.get("id", obj.get("_id", default_id)))
    match = obj.get("match", match)
    if match not in ("string", "regex"):
        raise DataFormatError(path, line, "'match' to be 'string' or 'regex'", repr(match))
    return Question(qid, text, _answer_list(obj[key], path, line), match, str(obj.get("source", "")))


def _read_dpr_tsv(path: Path, name: str, match: str) -> list[Question]:
    questions: list[Question] = []
    reader = csv.reader((line + "\n" for _, line in _lines(path)), delimiter="\t")
    for row in reader:
        line = reader.line_num
        if not row or (len(row) == 1 and not row[0].strip()):
            continue
        if len(row) != 2:
            raise DataFormatError(path, line, "2 tab-separated fields (question, answer list)", f"{len(row)} fields")
        try:
            answers = ast.literal_eval(row[1])
        except (ValueError, SyntaxError):
            raise DataFormatError(path, line, "a Python list of answers in field 2", preview(row[1])) from None
        answer_list = _answer_list(answers, path, line)
        questions.append(Question(f"{name}-{len(questions)}", row[0], answer_list, match))  # type: ignore[arg-type]
    return questions


def _read_json_lines(path: Path, name: str, match: str) -> list[Question]:
    questions: list[Question] = []
    for line, obj in parse_json_lines(_lines(path), path):
        questions.append(_question(obj, path, line, f"{name}-{len(questions)}", match))
    return questions


def _read_json_array(path: Path, name: str, match: str) -> list[Question]:
    with open_text(path) as handle:
        try:
            rows = json.load(handle)
        except json.JSONDecodeError as err:
            raise DataFormatError(path, err.lineno, "a JSON array of questions", f"invalid JSON ({err.msg})") from None
    if not isinstance(rows, list):
        raise DataFormatError(path, None, "a JSON array of questions", type(rows).__name__)
    return [_question(obj, path, 1, f"{name}-{i}", match) for i, obj in enumerate(rows)]


def read_qa(path: str | Path, match: str = "auto", limit: int | None = None) -> QASet:
    """Questions and gold answers from a DPR tsv, JSON lines or a JSON array (format by content).

    ``match="auto"`` treats answers as regular expressions for CuratedTREC files (name starting
    with ``curated`` or ``topics.dpr.curated``) and as strings otherwise; a JSON question may set its
    own ``"match"``. ``limit`` keeps the first questions of the file.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"QA file not found: {path}")
    name = path.name.split(".")[0] if not path.name.startswith("topics.dpr.") else path.name.split(".")[2]
    if match == "auto":
        match = "regex" if name.startswith("curated") else "string"
    if match not in ("string", "regex"):
        raise ValueError(f"unknown answer match {match!r}; valid: auto, string, regex")
    with open_text(path) as handle:
        start = handle.read(4096).lstrip()[:1]
    reader = {"[": _read_json_array, "{": _read_json_lines}.get(start, _read_dpr_tsv)
    questions = reader(path, name, match)
    if not questions:
        raise DataFormatError(path, None, "at least one question", "none")
    ids = [q.id for q in questions]
    if len(set(ids)) != len(ids):
        raise DataFormatError(path, None, "unique question ids", f"{len(ids) - len(set(ids))} repeated")
    return QASet(name, questions[:limit] if limit else questions, str(path))
