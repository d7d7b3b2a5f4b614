"""NFCorpus as a test set: its graded qrels (1-2, CRLF lines as released) read as graded gains, scored
by pytrec_eval's graded nDCG@10, and named the way a sweep names it (``data/beir/nfcorpus``)."""

from __future__ import annotations

import math

import pytest
import torch
from text_fixtures import SHARED_DATA, require

from clipmag.config.build import build_config
from clipmag.runtime.distributed import DistributedContext
from text_retrieval.config import TextConfig
from text_retrieval.data.loaders import load_beir
from text_retrieval.evaluation.metrics import evaluate_run
from text_retrieval.task import TextRetrievalTask

NFCORPUS = SHARED_DATA / "beir" / "nfcorpus"


def _dcg(gains: list[int]) -> float:
    return sum(g / math.log2(rank + 2) for rank, g in enumerate(gains[:10]))


def test_the_test_split_keeps_both_grades_and_the_official_counts():
    ds = load_beir(require(NFCORPUS), split="test")
    judged = [(doc, gain) for per_query in ds.qrels.values() for doc, gain in per_query.items()]
    assert (len(ds.corpus_ids), len(ds.queries), len(judged)) == (3633, 323, 12334)
    assert {gain for _, gain in judged} == {1, 2}
    assert sum(gain == 2 for _, gain in judged) == 576
    assert not any("\r" in doc for doc, _ in judged)  # the released CRLF line ends are not part of an id


def test_graded_ndcg_counts_a_grade_2_document_above_a_grade_1():
    """Putting the grade-1 documents first costs nDCG@10 exactly what trec_eval's gain / log2(rank + 1) says."""
    ds = load_beir(require(NFCORPUS), split="test")
    qid = next(q for q, judged in ds.qrels.items() if 1 in judged.values() and 2 in judged.values())
    judged = ds.qrels[qid]
    twos = sorted(d for d, g in judged.items() if g == 2)
    ones = sorted(d for d, g in judged.items() if g == 1)
    ideal = _dcg([2] * len(twos) + [1] * len(ones))
    for order, gains in (
        (twos + ones, [2] * len(twos) + [1] * len(ones)),
        (ones + twos, [1] * len(ones) + [2] * len(twos)),
    ):
        run = {qid: {doc: float(len(order) - rank) for rank, doc in enumerate(order)}}
        mean, per_query = evaluate_run({qid: judged}, run, ["NDCG@10"])
        assert per_query[qid]["NDCG@10"] == pytest.approx(_dcg(gains) / ideal, abs=1e-4)
    assert mean["NDCG@10"] < 1.0  # the last order ranks the grade-2 documents below the grade-1 ones


def test_a_run_names_it_as_a_test_set_with_its_official_dev_split_for_validation(monkeypatch, tmp_path):
    """The spelling a sweep uses, relative to the checkout's ``data`` link to the shared data: test split
    tested, dev split validated. The link is made in a scratch folder, as a fresh clone has none."""
    (tmp_path / "data").symlink_to(require(NFCORPUS).parents[1], target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    spec = "data/beir/nfcorpus"
    cfg = build_config(
        TextConfig, None, [f"data.test=[{spec}]", f"data.validation=[{spec}]", "data.validation_split=dev"]
    )
    task = TextRetrievalTask(cfg, DistributedContext(0, 1, 0, torch.device("cpu"), None))
    (test,), (dev,) = task.test_sets, task.validation_sets
    assert (test.name, test.split, len(test.queries)) == ("nfcorpus", "test", 323)
    assert (dev.split, len(dev.queries)) == ("dev", 324) and not set(dev.queries) & set(test.queries)
