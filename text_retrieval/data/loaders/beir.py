"""BEIR-layout retrieval data, and the in-memory dataset every retrieval evaluation works on.

Layout (https://github.com/beir-cellar/beir): ``corpus.jsonl`` (or ``corpus.jsonl.gz``) with one
``{"_id", "title", "text"}`` per line, ``queries.jsonl`` with ``{"_id", "text"}``, and
``qrels/<split>.tsv`` with the header ``query-id  corpus-id  score`` (graded integers).

As in BEIR, only the queries judged in the chosen split are kept, and a document's text is
``title + " " + text`` (stripped), which is what MTEB's public numbers use.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from pathlib import Path

from clipmag.storage.user_files import check_inside
from text_retrieval.data.loaders.reading import DataFormatError, find_file, iter_jsonl, iter_tsv, require_str

logger = logging.getLogger("clipmag")

__all__ = [
    "RetrievalDataset",
    "corpus_fingerprint",
    "load_beir",
    "is_beir_folder",
    "read_qrels",
    "read_corpus",
    "read_queries",
    "IGNORE_IDENTICAL_IDS",
]

# BEIR datasets whose queries are also corpus documents, so a query's own id is never a hit: MTEB's
# per-task setting (ArguAna, Quora); BEIR's original evaluator dropped such hits for every dataset.
IGNORE_IDENTICAL_IDS = frozenset({"arguana", "quora"})


def corpus_fingerprint(ids: list[str], texts: list[str]) -> str:
    """A digest of a corpus's ids and texts in order: what a corpus cache or a served index was made from."""
    digest = hashlib.sha1()
    for doc_id, text in zip(ids, texts):
        digest.update(doc_id.encode("utf-8") + b"\0" + text.encode("utf-8") + b"\1")
    return digest.hexdigest()[:16]


@dataclass
class RetrievalDataset:
    """Queries, corpus and graded judgments of one retrieval split.

    ``excluded`` holds per-query document ids that must never count as hits (BRIGHT's
    ``excluded_ids``); ``ignore_identical_ids`` drops a hit whose id equals the query id, which is
    right only where queries are also corpus documents (ArguAna, Quora): :func:`load_beir` sets it
    per dataset as MTEB does (``IGNORE_IDENTICAL_IDS``).
    """

    name: str
    corpus_ids: list[str]
    corpus_texts: list[str]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    excluded: dict[str, set[str]] = field(default_factory=dict)
    ignore_identical_ids: bool = False
    kind: str = "beir"
    split: str = "test"
    source: str = ""
    fingerprint: str = ""

    def __post_init__(self) -> None:
        if len(self.corpus_ids) != len(self.corpus_texts):
            raise ValueError(f"{self.name}: {len(self.corpus_ids)} corpus ids but {len(self.corpus_texts)} texts")
        if not self.fingerprint:
            self.fingerprint = corpus_fingerprint(self.corpus_ids, self.corpus_texts)

    @property
    def query_ids(self) -> list[str]:
        return list(self.queries)

    def relevant_ids(self) -> set[str]:
        """Documents judged relevant (gain > 0) for at least one query of the split."""
        return {doc for judged in self.qrels.values() for doc, gain in judged.items() if gain > 0}

    def subset(self, n_queries: int | None = None, n_docs: int | None = None) -> RetrievalDataset:
        """A smaller copy that keeps every judged document of the kept queries (for quick checks)."""
        qids = self.query_ids[:n_queries] if n_queries else self.query_ids
        qrels = {q: dict(self.qrels[q]) for q in qids}
        keep = {d for judged in qrels.values() for d in judged}
        if n_docs is not None:
            for doc_id in self.corpus_ids:
                if len(keep) >= n_docs:
                    break
                keep.add(doc_id)
        pairs = [(i, t) for i, t in zip(self.corpus_ids, self.corpus_texts) if i in keep]
        return RetrievalDataset(
            name=self.name,
            corpus_ids=[i for i, _ in pairs],
            corpus_texts=[t for _, t in pairs],
            queries={q: self.queries[q] for q in qids},
            qrels=qrels,
            excluded={q: set(self.excluded.get(q, ())) for q in qids if q in self.excluded},
            ignore_identical_ids=self.ignore_identical_ids,
            kind=self.kind,
            split=self.split,
            source=self.source,
        )


def is_beir_folder(path: str | Path) -> bool:
    path = Path(path)
    return (
        path.is_dir() and find_file(path, "corpus.jsonl", "corpus.jsonl.gz") is not None and (path / "qrels").is_dir()
    )


def read_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """Read a BEIR qrels tsv (header ``query-id corpus-id score``; graded integer scores)."""
    qrels: dict[str, dict[str, int]] = {}
    for number, fields in iter_tsv(path):
        if number == 1 and fields[0].strip().lower() in {"query-id", "query_id", "qid"}:
            continue
        if len(fields) < 3:
            raise DataFormatError(
                path, number, "3 tab-separated fields (query-id, corpus-id, score)", f"{len(fields)} field(s)"
            )
        qid, doc_id, score = fields[0].strip(), fields[1].strip(), fields[2].strip()
        try:
            gain = int(float(score))
        except ValueError:
            raise DataFormatError(path, number, "an integer relevance score in the third field", repr(score)) from None
        qrels.setdefault(qid, {})[doc_id] = gain
    if not qrels:
        raise DataFormatError(path, None, "at least one judgment (query-id, corpus-id, score)", "none")
    return qrels


def read_corpus(path: Path) -> tuple[list[str], list[str]]:
    """Ids and texts of a BEIR ``corpus.jsonl[.gz]``, each text ``title + " " + text`` (stripped)."""
    ids: list[str] = []
    texts: list[str] = []
    seen: dict[str, int] = {}
    for number, obj in iter_jsonl(path):
        doc_id = require_str(obj, "_id", path, number, allow_empty=False)
        if doc_id in seen:
            raise DataFormatError(path, number, f"a unique '_id' ({doc_id!r} already on line {seen[doc_id]})")
        seen[doc_id] = number
        text = require_str(obj, "text", path, number)
        title = obj.get("title") or ""
        if not isinstance(title, str):
            raise DataFormatError(path, number, "'title' to be a string", type(title).__name__)
        ids.append(doc_id)
        texts.append((title + " " + text).strip() if title else text.strip())
    if not ids:
        raise DataFormatError(path, None, "at least one document", "an empty corpus")
    return ids, texts


def read_queries(path: Path) -> dict[str, str]:
    queries: dict[str, str] = {}
    for number, obj in iter_jsonl(path):
        qid = require_str(obj, "_id", path, number, allow_empty=False)
        queries[qid] = require_str(obj, "text", path, number)
    if not queries:
        raise DataFormatError(path, None, 'at least one query ({"_id", "text"} per line)', "an empty file")
    return queries


def load_beir(
    path: str | Path, split: str = "test", strict: bool = True, ignore_identical_ids: bool | None = None
) -> RetrievalDataset:
    """Load one split of a BEIR folder.

    With ``strict`` (the default) a judgment naming a document missing from the corpus, or a query
    missing from ``queries.jsonl``, is an error; otherwise it is dropped with a warning.
    ``ignore_identical_ids`` (None: MTEB's choice for the folder's name, ``IGNORE_IDENTICAL_IDS``)
    drops a hit whose document id is the query's id.
    """
    folder = Path(path)
    if not folder.is_dir():
        raise FileNotFoundError(f"BEIR folder not found: {folder}")
    corpus_path = find_file(folder, "corpus.jsonl", "corpus.jsonl.gz")
    queries_path = find_file(folder, "queries.jsonl", "queries.jsonl.gz")
    qrels_path = folder / "qrels" / f"{split}.tsv"
    for needed, what in (
        (corpus_path, "corpus.jsonl[.gz]"),
        (queries_path, "queries.jsonl"),
        (qrels_path, f"qrels/{split}.tsv"),
    ):
        if needed is None or not Path(needed).is_file():
            available = sorted(p.stem for p in (folder / "qrels").glob("*.tsv")) if (folder / "qrels").is_dir() else []
            raise FileNotFoundError(f"{folder}: missing {what} (BEIR layout; qrels splits present: {available})")
    assert corpus_path is not None and queries_path is not None
    check_inside(qrels_path, folder)
    corpus_ids, corpus_texts = read_corpus(corpus_path)
    all_queries = read_queries(queries_path)
    qrels = read_qrels(qrels_path)
    known_docs = set(corpus_ids)
    lines = {}  # recover line numbers only when reporting a problem
    for number, fields in iter_tsv(qrels_path):
        lines.setdefault((fields[0].strip(), fields[1].strip() if len(fields) > 1 else ""), number)
    for qid in list(qrels):
        if qid not in all_queries:
            line = next((n for (q, _), n in lines.items() if q == qid), None)
            problem = DataFormatError(qrels_path, line, f"query-id {qid!r} to be in {queries_path.name}")
            if strict:
                raise problem
            logger.warning("%s; dropping it", problem)
            del qrels[qid]
            continue
        for doc_id in list(qrels[qid]):
            if doc_id not in known_docs:
                problem = DataFormatError(
                    qrels_path, lines.get((qid, doc_id)), f"corpus-id {doc_id!r} to be in {corpus_path.name}"
                )
                if strict:
                    raise problem
                logger.warning("%s; dropping it", problem)
                del qrels[qid][doc_id]
        if not qrels[qid]:
            del qrels[qid]
    queries = {qid: all_queries[qid] for qid in all_queries if qid in qrels}
    logger.info(
        "loaded %s/%s: %d docs, %d queries, %d judgments",
        folder.name,
        split,
        len(corpus_ids),
        len(queries),
        sum(map(len, qrels.values())),
    )
    return RetrievalDataset(
        name=folder.name,
        corpus_ids=corpus_ids,
        corpus_texts=corpus_texts,
        queries=queries,
        qrels=qrels,
        ignore_identical_ids=(
            folder.name.lower() in IGNORE_IDENTICAL_IDS if ignore_identical_ids is None else ignore_identical_ids
        ),
        kind="beir",
        split=split,
        source=str(folder.resolve()),
    )
