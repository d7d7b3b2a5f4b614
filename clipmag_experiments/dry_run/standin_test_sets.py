"""Stand-ins for the paper's test sets, in the layouts the project's loaders and converters read.

* BEIR, as its zips unpack: ``<name>/corpus.jsonl`` ``{_id, title, text}``, ``queries.jsonl``
  ``{_id, text}``, ``qrels/test.tsv`` with its header; ``arguana`` gives every query an id that is
  also a corpus document (its own argument), as the real set does, so the id rule is exercised;
* BRIGHT as the hub repository ``xlangai/BRIGHT`` holds it, all 12 tasks:
  ``{examples,documents,long_documents}/<task>-00000-of-00001.parquet`` (long documents for the
  StackExchange tasks and pony, each page the concatenation of its chunks; ``excluded_ids`` for the
  coding and maths tasks, ``["N/A"]`` elsewhere), for ``download bright ROOT --snapshot DIR``;
* DPR: ``psgs_w100.tsv`` (``id text title`` with its header), NQ-open and TriviaQA test files
  (``question<TAB>['answer', ...]``) and HotpotQA's fullwiki dev file (a JSON array, one answer each).

Texts come from :class:`clipmag_experiments.dry_run.standin_training_sets.TopicText`; the training sources' stand-ins
are in :mod:`clipmag_experiments.dry_run.standin_training_sets`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from clipmag_experiments.dry_run.standin_training_sets import FILLER, TopicText
from text_retrieval.data.loaders.bright import BRIGHT_TASKS, LONG_DOCUMENT_TASKS

__all__ = ["write_beir", "write_bright_hub", "write_dpr"]

EXCLUDING_TASKS = ("leetcode", "aops", "theoremqa_questions", "theoremqa_theorems")


def _jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")


def write_beir(folder: str | Path, queries: int = 12, documents: int = 60, seed: int = 0) -> Path:
    """A BEIR folder with split ``test``: each query judges one or two passages of its topic (gain 1 or 2)."""
    folder, text = Path(folder), TopicText(seed)
    own_ids = folder.name == "arguana"
    corpus, query_rows, judged = [], [], []
    for q in range(queries):
        topic = text.topic()
        query_id = f"doc{q}" if own_ids else f"q{q}"
        if own_ids:  # the query's own argument is in the corpus under the query's id, as in ArguAna
            corpus.append({"_id": query_id, "title": "", "text": text.passage(topic, 10)})
        for j in range(1 + q % 2):
            doc_id = f"rel{q}-{j}"
            corpus.append({"_id": doc_id, "title": text.title(topic), "text": text.passage(topic)})
            judged.append(f"{query_id}\t{doc_id}\t{2 - j}")
        query_rows.append({"_id": query_id, "text": text.query(topic)})
    corpus += [{"_id": f"d{i}", "title": "", "text": text.passage(text.topic())} for i in range(documents)]
    _jsonl(folder / "corpus.jsonl", corpus)
    _jsonl(folder / "queries.jsonl", query_rows)
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(judged) + "\n")
    return folder


def _parquet(path: Path, rows: list[dict[str, Any]]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)


def _bright_task(text: TopicText, task: str, examples: int, pages: int) -> tuple[list, list, list]:
    """(examples, chunk documents, long documents) of one task; pages of 1-3 chunks each."""
    topics = [text.topic() for _ in range(pages)]
    chunks = {f"{task}-page{p}": [text.passage(t, 20) for _ in range(1 + p % 3)] for p, t in enumerate(topics)}
    rows = []
    for e in range(examples):
        page = f"{task}-page{e}"
        gold = [f"{page}-{i}" for i in range(len(chunks[page]))][:2]
        excluded = [f"{task}-page{pages - 1}-0"] if task in EXCLUDING_TASKS else ["N/A"]
        # a long post, as BRIGHT's are: past the training configs' 64 query tokens, within the model's 512
        query = f"{text.passage(topics[e], 90)} How does the {' '.join(topics[e][:2])} work?"
        rows.append(
            {
                "query": query,
                "reasoning": "",
                "id": str(e),
                "excluded_ids": excluded,
                "gold_ids_long": [page] if task in LONG_DOCUMENT_TASKS else [],
                "gold_ids": gold,
                "gold_answer": "",
            }
        )
    documents = [{"id": f"{page}-{i}", "content": c} for page, texts in chunks.items() for i, c in enumerate(texts)]
    long_documents = [{"id": page, "content": " ".join(texts)} for page, texts in chunks.items()]
    return rows, documents, long_documents


def write_bright_hub(root: str | Path, examples: int = 4, pages: int = 12, seed: int = 0) -> Path:
    """The hub repository's parquet files for all 12 tasks (long documents where BRIGHT has them)."""
    root, text = Path(root), TopicText(seed)
    for task in BRIGHT_TASKS:
        rows, documents, long_documents = _bright_task(text, task, examples, pages)
        name = f"{task}-00000-of-00001.parquet"
        _parquet(root / "examples" / name, rows)
        _parquet(root / "documents" / name, documents)
        if task in LONG_DOCUMENT_TASKS:
            _parquet(root / "long_documents" / name, long_documents)
    return root


def _qa_items(passages: list[dict[str, str]], count: int, start: int) -> list[tuple[str, list[str]]]:
    """Questions whose answer (a word of one passage's text) the reader could find in that passage."""
    items = []
    for i in range(count):
        passage = passages[(start + 7 * i) % len(passages)]
        words = passage["text"].rstrip(".").lower().split()
        answer = next(w for w in words if w not in FILLER)
        items.append((f"which word comes with {passage['title'].lower()} in passage {i}?", [answer]))
    return items


def write_dpr(root: str | Path, passages: int = 150, questions: int = 12, seed: int = 0) -> Path:
    """``root/dpr/{psgs_w100.tsv,nq.test.txt,trivia.test.txt}`` and
    ``root/hotpotqa/hotpot_dev_fullwiki_v1.json``; returns ``root``."""
    root, text = Path(root), TopicText(seed)
    rows = []
    for i in range(passages):
        topic = text.topic()
        rows.append({"id": str(i + 1), "title": text.title(topic), "text": text.passage(topic, 30)})
    dpr = root / "dpr"
    dpr.mkdir(parents=True, exist_ok=True)
    lines = [f"{r['id']}\t{r['text']}\t{r['title']}\n" for r in rows]
    (dpr / "psgs_w100.tsv").write_text("id\ttext\ttitle\n" + "".join(lines), encoding="utf-8")
    for start, name in enumerate(("nq.test.txt", "trivia.test.txt")):
        qa = _qa_items(rows, questions, start)
        (dpr / name).write_text("".join(f"{q}\t{answers!r}\n" for q, answers in qa), encoding="utf-8")
    hotpot = [
        {"_id": f"hp{i:04d}", "question": q, "answer": answers[0], "type": "bridge", "level": "hard"}
        | {"supporting_facts": [], "context": []}
        for i, (q, answers) in enumerate(_qa_items(rows, questions, 2))
    ]
    (root / "hotpotqa").mkdir(parents=True, exist_ok=True)
    (root / "hotpotqa" / "hotpot_dev_fullwiki_v1.json").write_text(json.dumps(hotpot), encoding="utf-8")
    return root
