"""A dev split carved from a BEIR set's training queries: disjoint from its training pairs and from
its test queries, the same from the same source, and refused when a training query is a test query."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from text_fixtures import SCIFACT, require

from clipmag.errors import UserError
from text_retrieval.data.loaders.beir import load_beir
from text_retrieval.data.training.beir_dev_split import build_dev_split


def _beir(root: Path, train: dict[str, str], test: dict[str, str]) -> Path:
    root.mkdir(parents=True)
    docs = [{"_id": f"d{i}", "title": "", "text": f"document number {i} about topic {i % 7}"} for i in range(40)]
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    queries = {**train, **test}
    (root / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries.items()))
    (root / "qrels").mkdir()
    for split, ids in (("train", train), ("test", test)):
        rows = "".join(f"{q}\td{int(q[1:]) % 40}\t1\n" for q in ids)
        (root / "qrels" / f"{split}.tsv").write_text("query-id\tcorpus-id\tscore\n" + rows)
    return root


def test_dev_queries_are_training_queries_held_out_of_the_pairs(tmp_path):
    train = {f"q{i}": f"what is topic {i}" for i in range(30)}
    source = _beir(tmp_path / "src", train, {f"q{i}": f"which test topic {i}" for i in range(30, 36)})
    manifest = build_dev_split(source, tmp_path / "out", dev_queries=8, dev_corpus=20)
    dev = load_beir(tmp_path / "out" / "dev", split="dev")
    pairs = [json.loads(line) for line in (tmp_path / "out" / "pairs.jsonl").read_text().splitlines()]
    assert len(dev.queries) == 8 and set(dev.queries) <= set(train) and len(dev.corpus_ids) == 20
    assert not {p["query_id"] for p in pairs} & set(dev.queries) and len(pairs) == 22
    assert manifest["dev_query_ids"] == sorted(dev.queries, key=manifest["dev_query_ids"].index)
    build_dev_split(source, tmp_path / "again", dev_queries=8, dev_corpus=20)
    for name in ("pairs.jsonl", "dev/corpus.jsonl", "dev/queries.jsonl", "dev/qrels/dev.tsv"):
        assert (tmp_path / "out" / name).read_bytes() == (tmp_path / "again" / name).read_bytes()


def test_a_training_query_that_is_a_test_query_is_refused(tmp_path):
    train = {f"q{i}": f"what is topic {i}" for i in range(10)}
    test = {f"q{i + 20}": f"What is  topic {i}" for i in range(10)}  # the training queries' texts again
    with pytest.raises(UserError, match="are test queries too"):
        build_dev_split(_beir(tmp_path / "src", train, test), tmp_path / "out", dev_queries=3)


def test_scifact_dev_split_is_disjoint_from_its_test_queries(tmp_path):
    require(SCIFACT)
    manifest = build_dev_split(SCIFACT, tmp_path / "split")
    test = load_beir(SCIFACT, split="test")
    assert len(manifest["dev_query_ids"]) == 100 and not set(manifest["dev_query_ids"]) & set(test.qrels)
    assert (
        manifest["pairs"]
        + sum(len(load_beir(tmp_path / "split" / "dev", split="dev").qrels[q]) for q in manifest["dev_query_ids"])
        == 919
    )
