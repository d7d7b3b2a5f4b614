"""Evaluation data loaders: real shared files, layout detection, and the promised error messages."""

from __future__ import annotations

import gzip
import json
import logging
import shutil

import pytest
from text_fixtures import CRANFIELD, SCIFACT, SICK, STS12_16, STSB, require, write_beir

from text_retrieval.data.loaders import (
    DataFormatError,
    detect_kind,
    load_beir,
    load_bright,
    load_eval_datasets,
    load_sts,
    load_sts_file,
)

CORPUS = [
    {"_id": "d1", "title": "T1", "text": "one"},
    {"_id": "d2", "title": "", "text": "two"},
    {"_id": "d3", "text": "three"},
]
QUERIES = [{"_id": "q1", "text": "first"}, {"_id": "q2", "text": "second"}, {"_id": "q9", "text": "unjudged"}]
QRELS = [("q1", "d1", 1), ("q1", "d2", 0), ("q2", "d3", 2)]


def test_scifact_counts_and_document_text():
    ds = load_beir(require(SCIFACT), split="test")
    assert (len(ds.corpus_ids), len(ds.queries), sum(map(len, ds.qrels.values()))) == (5183, 300, 339)
    first = json.loads((SCIFACT / "corpus.jsonl").open(encoding="utf-8").readline())
    assert ds.corpus_texts[0] == (first["title"] + " " + first["text"]).strip()
    assert not ds.ignore_identical_ids and ds.kind == "beir"  # MTEB keeps same-id hits except for ArguAna, Quora


def test_same_id_hits_are_dropped_per_dataset_as_mteb_does(tmp_path):
    from text_retrieval.data.loaders.beir import IGNORE_IDENTICAL_IDS

    for name in ("arguana", "scifact"):
        write_beir(tmp_path / name, CORPUS, QUERIES, QRELS)
        assert load_beir(tmp_path / name).ignore_identical_ids == (name in IGNORE_IDENTICAL_IDS)
    assert load_beir(tmp_path / "scifact", ignore_identical_ids=True).ignore_identical_ids


def test_cranfield_graded_qrels():
    ds = load_beir(require(CRANFIELD))
    gains = {g for judged in ds.qrels.values() for g in judged.values()}
    assert len(ds.queries) == 225 and gains <= {0, 1, 2, 3, 4} and len(gains) > 2


def test_beir_small_folder_keeps_judged_queries(tmp_path):
    ds = load_beir(write_beir(tmp_path, CORPUS, QUERIES, QRELS))
    assert ds.query_ids == ["q1", "q2"]
    assert ds.corpus_texts == ["T1 one", "two", "three"]
    assert ds.qrels == {"q1": {"d1": 1, "d2": 0}, "q2": {"d3": 2}}
    assert ds.relevant_ids() == {"d1", "d3"}


def test_beir_gzipped_corpus(tmp_path):
    folder = write_beir(tmp_path, CORPUS, QUERIES, QRELS)
    with open(folder / "corpus.jsonl", "rb") as src, gzip.open(folder / "corpus.jsonl.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    (folder / "corpus.jsonl").unlink()
    assert load_beir(folder).corpus_ids == ["d1", "d2", "d3"]


def test_malformed_corpus_line_names_file_and_line(tmp_path):
    folder = write_beir(tmp_path, CORPUS, QUERIES, QRELS)
    lines = (folder / "corpus.jsonl").read_text().splitlines()
    lines[1] = '{"_id": "d2", "text": "unterminated'
    (folder / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(
        DataFormatError, match=r"corpus\.jsonl, line 2: expected one JSON object per line, found invalid JSON"
    ):
        load_beir(folder)
    lines[1] = '{"title": "no id", "text": "x"}'
    (folder / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(DataFormatError, match=r"corpus\.jsonl, line 2: expected a '_id' field"):
        load_beir(folder)


def test_qrels_naming_missing_doc(tmp_path, caplog):
    folder = write_beir(tmp_path, CORPUS, QUERIES, QRELS + [("q2", "ghost", 1)])
    with pytest.raises(DataFormatError, match=r"test\.tsv, line 5: expected corpus-id 'ghost' to be in corpus\.jsonl"):
        load_beir(folder)
    with caplog.at_level(logging.WARNING, logger="clipmag"):
        ds = load_beir(folder, strict=False)
    assert "ghost" not in ds.qrels["q2"] and "ghost" in caplog.text


def test_qrels_naming_missing_query_and_bad_score(tmp_path):
    folder = write_beir(tmp_path, CORPUS, QUERIES, QRELS + [("q7", "d1", 1)])
    with pytest.raises(DataFormatError, match=r"line 5: expected query-id 'q7' to be in queries\.jsonl"):
        load_beir(folder)
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\thigh\n")
    with pytest.raises(DataFormatError, match=r"line 2: expected an integer relevance score"):
        load_beir(folder)


def test_empty_query_file(tmp_path):
    folder = write_beir(tmp_path, CORPUS, [], QRELS)
    with pytest.raises(DataFormatError, match=r"queries\.jsonl: expected at least one query"):
        load_beir(folder)


def test_missing_split_lists_available(tmp_path):
    folder = write_beir(tmp_path, CORPUS, QUERIES, QRELS)
    with pytest.raises(FileNotFoundError, match=r"qrels/dev\.tsv.*\['test'\]"):
        load_beir(folder, split="dev")


def _write_bright(folder, examples, docs):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "examples.jsonl").write_text("".join(json.dumps(e) + "\n" for e in examples))
    (folder / "documents.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    return folder


def test_bright_excluded_ids(tmp_path):
    docs = [{"id": f"doc{i}", "content": f"text {i}"} for i in range(4)]
    examples = [
        {"id": "0", "query": "why?", "gold_ids": ["doc1"], "excluded_ids": ["doc0"]},
        {"id": "1", "query": "how?", "gold_ids": ["doc2", "doc3"], "excluded_ids": ["N/A"]},
    ]
    folder = _write_bright(tmp_path / "biology", examples, docs)
    assert detect_kind(folder) == "bright" and detect_kind(tmp_path) == "bright-collection"
    ds = load_bright(folder)
    assert ds.qrels == {"0": {"doc1": 1}, "1": {"doc2": 1, "doc3": 1}}
    assert ds.excluded == {"0": {"doc0"}} and not ds.ignore_identical_ids
    examples[1]["gold_ids"] = ["doc9"]
    _write_bright(folder, examples, docs)
    assert load_bright(folder).qrels["1"] == {"doc9": 1}  # kept, as the official evaluation keeps it
    with pytest.raises(
        DataFormatError, match=r"examples\.jsonl, line 2: expected gold ids present in documents\.jsonl"
    ):
        load_bright(folder, strict=True)


def test_stsb_file_with_raw_quotes_and_extra_fields():
    pairs = load_sts_file(require(STSB) / "sts-test.csv")
    assert len(pairs) == 1379
    assert pairs.scores.min() >= 0 and pairs.scores.max() <= 5
    raw_lines = (STSB / "sts-test.csv").read_text(encoding="utf-8").splitlines()
    nine = next(line.split("\t") for line in raw_lines if len(line.split("\t")) == 9)
    assert nine[5].strip() in pairs.a


def test_sick_crlf_and_sts12_16_folder():
    sick = load_sts(require(SICK), split="test")
    assert len(sick) == 1 and len(sick[0]) == 4927 and not any(s.endswith("\r") for s in sick[0].b)
    sets = load_sts(require(STS12_16))
    assert [s.name for s in sets] == ["sts12", "sts13", "sts14", "sts15", "sts16"]
    assert [len(s) for s in sets] == [3108, 1500, 3750, 3000, 1186]


def test_generic_tsv_and_errors(tmp_path):
    good = tmp_path / "pairs.tsv"
    good.write_text('a "quoted" one\tanother\t0.5\nthird\tfourth\t1\n')
    pairs = load_sts_file(good)
    assert pairs.a == ['a "quoted" one', "third"] and list(pairs.scores) == [0.5, 1.0]
    assert detect_kind(good) == "sts"
    bad = tmp_path / "bad.tsv"
    bad.write_text("a\tb\t0.5\nc\td\tvery\n")
    with pytest.raises(
        DataFormatError, match=r"bad\.tsv, line 2: expected a numeric gold score in field 3, found 'very'"
    ):
        load_sts_file(bad)
    short = tmp_path / "short.tsv"
    short.write_text("a\tb\t0.5\nonly one field\n")
    with pytest.raises(DataFormatError, match=r"short\.tsv, line 2: expected 3 tab-separated fields"):
        load_sts_file(short)
    empty = tmp_path / "empty.tsv"
    empty.write_text("")
    with pytest.raises(DataFormatError, match="empty file"):
        load_sts_file(empty)


def test_detect_kind_on_shared_layouts_and_unknown(tmp_path):
    assert detect_kind(require(SCIFACT)) == "beir"
    assert detect_kind(require(STSB)) == "sts"
    assert [d.name for d in load_eval_datasets(STSB, split="dev")] == ["stsbenchmark-dev"]
    (tmp_path / "notes.md").write_text("hello")
    with pytest.raises(ValueError, match="not a recognised evaluation dataset"):
        detect_kind(tmp_path)


def test_download_fails_fast_offline(monkeypatch, tmp_path):
    from clipmag.storage import fetch as network
    from text_retrieval.data import fetch

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConnectionError, match="HF_HUB_OFFLINE"):
        fetch.download_bright(tmp_path, tasks=("biology",))

    def refuse(*args, **kwargs):
        raise OSError("network unreachable")

    monkeypatch.setattr(network.socket, "create_connection", refuse)
    with pytest.raises(ConnectionError, match=r"offline.*scifact\.zip"):
        fetch.download_beir("scifact", tmp_path)
