"""The qnorm/dnorm predictors: finite, seeded, a Fisher that matches a hand derivation, and a
condition number that ignores the units of the log-magnitude parameters.

A tiny randomly initialised BERT (hidden 32, 2 layers) with MiniLM's tokenizer keeps every test to
a few seconds; the real-model numbers come from running the script on MiniLM.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from text_fixtures import write_tiny_bert

from text_retrieval.predict.cli import main
from text_retrieval.predict.predictors import correlation_condition, fisher_verdict, magnitude_fisher, predict_norm

N_PAIRS = 32
WORDS = "open read write parse close send merge sort split join load save copy find list".split()


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory):
    return write_tiny_bert(tmp_path_factory.mktemp("tiny_bert"))


def _pairs(n: int = N_PAIRS) -> tuple[list[str], list[str]]:
    rng = np.random.default_rng(0)
    queries, documents = [], []
    for i in range(n):
        words = list(rng.choice(WORDS, size=3 + i % 5))
        queries.append(" ".join(words[:3]) + " the file")
        documents.append("def f(x):\n    return " + " ".join(words) + f" {i}")
    return queries, documents


def _encoder(folder):
    from text_retrieval.model.encoder import TextEncoder

    return TextEncoder.from_pretrained(str(folder), pooling="mean", max_length=32)


def _numbers(result: dict) -> dict:
    """The result without timings, for determinism checks."""
    out = json.loads(json.dumps(result))
    for part in ("query_cv_ratio", "fisher", "settings"):
        out[part] = {k: v for k, v in out[part].items() if "seconds" not in k}
    return out


def test_predictors_are_finite_and_seeded(tiny_model_dir):
    queries, documents = _pairs()
    small = {"probe_steps": 2, "probe_batch_size": 8, "fisher_batch_size": 8}
    first = predict_norm(_encoder(tiny_model_dir), queries, documents, seed=3, **small)
    again = predict_norm(_encoder(tiny_model_dir), queries, documents, seed=3, **small)
    cv, fisher = first["query_cv_ratio"], first["fisher"]
    for value in (
        cv["dcv"],
        cv["cv_pretrained"],
        cv["cv_after_dnorm"],
        cv["cv_after_dot"],
        fisher["kappa_query"],
        fisher["kappa_document"],
    ):
        assert math.isfinite(value) and value > 0
    assert fisher["kappa_query"] >= 1 and fisher["kappa_document"] >= 1
    assert cv["verdict"] in {"qnorm", "dnorm"} and fisher["verdict"] in {"qnorm", "dnorm"}
    assert _numbers(first) == _numbers(again)
    other = predict_norm(_encoder(tiny_model_dir), queries, documents, seed=4, **small)
    assert other["fisher"]["kappa_query"] != fisher["kappa_query"]  # the seed picks the batches


def test_probe_does_not_touch_the_encoder(tiny_model_dir):
    encoder = _encoder(tiny_model_dir)
    before = {k: v.clone() for k, v in encoder.model.state_dict().items()}
    predict_norm(encoder, *_pairs(16), probe_steps=1, probe_batch_size=8, fisher_batch_size=8)
    assert all(torch.equal(before[k], v) for k, v in encoder.model.state_dict().items())


def _fisher_by_hand(q: np.ndarray, d: np.ndarray, batches, scale: float = 20.0, units=None) -> dict[str, np.ndarray]:
    """Closed form of both 2x2 Fishers (dot head, q2d, log-norms centred per side).

    With z_ij = scale * q_i.d_j and p_i = softmax(z_i), d loss_i / d a = E_p[z_i] - z_ii for either
    side's shift a, d loss_i / d b_q = lq_i (E_p[z_i] - z_ii), d loss_i / d b_d = E_p[ld z_i] - ld_i z_ii.
    ``units[side] = (ua, ub)`` measures that side's (a, b) in other units (a = ua a', b = ub b'), which
    multiplies the gradient with respect to (a', b') by (ua, ub): a log-norm base of 2 is ua = ln 2.
    """
    units = units or {}
    lq, ld = np.log(np.linalg.norm(q, axis=1)), np.log(np.linalg.norm(d, axis=1))
    lq, ld = lq - lq.mean(), ld - ld.mean()
    q = q / np.exp(np.log(np.linalg.norm(q, axis=1)) - lq)[:, None]
    d = d / np.exp(np.log(np.linalg.norm(d, axis=1)) - ld)[:, None]
    rows = {"query": [], "document": []}
    for batch in batches:
        z = scale * q[batch] @ d[batch].T
        p = np.exp(z - z.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        for k, i in enumerate(batch):
            shift = p[k] @ z[k] - z[k, k]
            rows["query"].append([shift, lq[i] * shift])
            rows["document"].append([shift, p[k] @ (ld[batch] * z[k]) - ld[i] * z[k, k]])
    grads = {side: np.asarray(g) * np.asarray(units.get(side, (1.0, 1.0))) for side, g in rows.items()}
    return {side: g.T @ g / len(g) for side, g in grads.items()}


def test_fisher_matches_the_hand_derivation():
    rng = np.random.default_rng(1)
    q = rng.normal(size=(12, 5)) * rng.uniform(0.5, 2.0, size=(12, 1)) / 3
    d = rng.normal(size=(12, 5)) * rng.uniform(0.5, 2.0, size=(12, 1)) / 3
    batches = [[0, 3, 5, 7], [1, 2, 4, 6], [8, 9, 10, 11]]
    got = magnitude_fisher(torch.from_numpy(q), torch.from_numpy(d), batches)
    want = _fisher_by_hand(q, d, batches)
    for side in ("query", "document"):
        np.testing.assert_allclose(got[side], want[side], rtol=1e-9, atol=1e-12)
    assert got["query"][0, 0] == pytest.approx(got["document"][0, 0])  # the two shifts are one temperature


def test_kappa_and_verdict_ignore_the_units_of_the_log_magnitude_parameters():
    """Rescaling a or b (another log base, another unit for the gain) leaves kappa and the verdict as
    they are; the plain eigenvalue ratio it replaces picks either head depending on the units."""
    rng = np.random.default_rng(3)
    q = rng.normal(size=(16, 6)) * rng.uniform(0.5, 2.0, size=(16, 1)) / 3
    d = rng.normal(size=(16, 6)) * rng.uniform(0.5, 2.0, size=(16, 1)) / 3
    batches = [list(range(8)), list(range(8, 16))]
    base = fisher_verdict(_fisher_by_hand(q, d, batches))
    assert 1.0 < base["kappa_query"] < math.inf and 1.0 < base["kappa_document"] < math.inf
    plain = []
    for units in (
        {"query": (1.0, 1e3)},
        {"document": (1.0, 1e3)},
        {"query": (math.log(2), 1.0), "document": (math.log(2), 1.0)},
        {"query": (5.0, 0.01), "document": (0.2, 30.0)},
    ):
        fisher = _fisher_by_hand(q, d, batches, units=units)
        rescaled = fisher_verdict(fisher)
        assert rescaled["verdict"] == base["verdict"]
        for key in ("kappa_query", "kappa_document", "abs_rho_query", "abs_rho_document"):
            assert rescaled[key] == pytest.approx(base[key], rel=1e-9)
        plain.append("dnorm" if np.linalg.cond(fisher["query"]) < np.linalg.cond(fisher["document"]) else "qnorm")
    assert plain[:2] == ["qnorm", "dnorm"]  # the unit-dependent rule it replaces flips


def test_kappa_definition_and_degenerate_cases():
    """kappa = (1+|rho|)/(1-|rho|); equal query norms give the query gain no gradient: |rho| = 1."""
    assert correlation_condition(np.array([[4.0, -1.0], [-1.0, 1.0]])) == pytest.approx({"abs_rho": 0.5, "kappa": 3.0})
    assert correlation_condition(np.diag([4.0, 1e-9]))["kappa"] == pytest.approx(1.0)
    rng = np.random.default_rng(2)
    q = rng.normal(size=(8, 4))
    q = 1.7 * q / np.linalg.norm(q, axis=1, keepdims=True)
    d = rng.normal(size=(8, 4)) * rng.uniform(0.5, 2.0, size=(8, 1)) / 2
    fisher = magnitude_fisher(torch.from_numpy(q), torch.from_numpy(d), [list(range(8))])
    assert fisher["query"][1, 1] == pytest.approx(0.0, abs=1e-20)
    verdict = fisher_verdict(fisher)
    assert verdict["kappa_query"] == math.inf and verdict["kappa_document"] < math.inf
    assert verdict["verdict"] == "qnorm"  # the document side is the one whose magnitudes can be told apart
    with pytest.raises(ValueError, match="zero"):
        correlation_condition(np.zeros((2, 2)))


def test_command_writes_json(tiny_model_dir, tmp_path, capsys):
    queries, documents = _pairs(20)
    data = tmp_path / "pairs.jsonl"
    data.write_text(
        "".join(json.dumps({"query": a, "positive": b}) + "\n" for a, b in zip(queries, documents)), encoding="utf-8"
    )
    out = tmp_path / "predict.json"
    main(
        [
            "--model",
            str(tiny_model_dir),
            "--data",
            str(data),
            "--n-pairs",
            "16",
            "--max-length",
            "32",
            "--probe-steps",
            "1",
            "--probe-batch-size",
            "8",
            "--fisher-batch-size",
            "8",
            "--output",
            str(out),
        ]
    )
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["settings"]["n_pairs"] == 16 and result["settings"]["query_max_length"] == 32
    assert result["settings"]["data"] == str(data) and result["settings"]["seed"] == 0
    assert {result["query_cv_ratio"]["verdict"], result["fisher"]["verdict"]} <= {"qnorm", "dnorm"}
    assert "kappa_query" in capsys.readouterr().out
    with pytest.raises(FileNotFoundError):
        main(["--model", str(tiny_model_dir), "--data", str(tmp_path / "missing.jsonl")])


def test_report_reads_each_groups_verdicts(tmp_path):
    """The sweep report puts a group's own predict_norm.json (else the sweep's) next to its winner."""
    from clipmag_experiments.report.build import predictor_section
    from clipmag_experiments.report.tables import Cell, TableRow

    def row(group: str, qnorm: float, dnorm: float) -> TableRow:
        cells = {head: Cell(v, 0.0, 1, None, None) for head, v in (("qnorm", qnorm), ("dnorm", dnorm))}
        return TableRow(group, "m", "test", "NDCG@10", cells)

    fisher = {"verdict": "dnorm", "kappa_query": 1.5, "kappa_document": math.inf, "definition": "ours"}
    (tmp_path / "own").mkdir()
    (tmp_path / "own" / "predict_norm.json").write_text(json.dumps({"fisher": fisher}))
    (tmp_path / "predict_norm.json").write_text(json.dumps({"fisher": {**fisher, "verdict": "qnorm"}}))
    text = "\n".join(predictor_section(tmp_path, [row("own", 0.4, 0.5), row("shared", 0.4, 0.5)]))
    assert "`own/predict_norm.json`): predicted **dnorm** (kappa_query 1.5, kappa_document inf) - matches" in text
    assert "`predict_norm.json`): predicted **qnorm**" in text and "does not match" in text
