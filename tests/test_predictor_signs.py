"""Whether a diagnostic measured before fine-tuning predicts the sign of (head - cosine): leave one
start out, against the majority, with its uncertainty; on synthetic points and on the stored sweeps."""

from __future__ import annotations

import json
import random

import pytest
from conftest import REPO

from clipmag_experiments.predictor.points import Point
from clipmag_experiments.predictor.sign_accuracy import (
    collect_points,
    fit_rule,
    leave_one_start_out,
    main,
    score_predictors,
    wilson,
)

STORED = [REPO / "results" / "positive_regime", REPO / "results" / "fair_fight"]


def _points(n_starts: int, per_start: int, informative: bool, seed: int = 0) -> list[Point]:
    """Points whose qnorm change is above cosine exactly when the start's Cohen's d is above 0.2
    (``informative``), or at random whatever its d."""
    rng = random.Random(seed)
    points = []
    for s in range(n_starts):
        d = rng.uniform(-0.5, 0.8)
        for i in range(per_start):
            above = d > 0.2 if informative else rng.random() < 0.5
            delta = rng.uniform(0.001, 0.05) * (1 if above else -1)
            dataset = f"set{i % 2}"
            points.append(Point("synthetic", "g", f"start{s}", dataset, 2560, {"qnorm": delta}, 3, {"cohens_d": d}))
    return points


def test_the_fitted_rule_separates_what_is_separable():
    rule = fit_rule([0.1, 0.3, 0.5, 0.7], [False, False, True, True])
    assert (rule.direction, rule.threshold) == (1, pytest.approx(0.4))
    assert fit_rule([0.1, 0.3, 0.5, 0.7], [True, True, False, False]).direction == -1


def test_a_start_never_chooses_its_own_threshold():
    starts, values = ["a", "a", "b", "b", "c", "c"], [0.0, 0.0, 1.0, 1.0, 2.0, 2.0]
    outcomes = [False, False, True, True, True, True]
    said, majority, folds = leave_one_start_out(starts, values, outcomes)
    assert [f["held_out"] for f in folds] == ["a", "b", "c"]
    assert said[:2] == [True, True]  # fitted on b and c alone (all above), a is predicted above: wrong
    assert majority == [True, True, False, False, False, False]  # b's fold: a and c tie, so "not above"


def test_wilson_interval():
    assert wilson(0, 10)[0] == 0.0 and wilson(10, 10)[1] == pytest.approx(1.0)
    low, high = wilson(5, 10)
    assert low == pytest.approx(1 - high) and low == pytest.approx(0.2366, abs=1e-4)


def test_an_informative_diagnostic_beats_the_majority_and_noise_does_not():
    good = score_predictors(_points(8, 4, informative=True), features=["cohens_d"], permutations=200)
    rule = next(r for r in good["rules"] if r["head"] == "qnorm")
    assert rule["accuracy"] > rule["baseline"]["accuracy"] and rule["permutation_p"] < 0.05
    assert rule["interval"][0] <= rule["accuracy"] <= rule["interval"][1] and rule["starts"] == 8
    assert "beyond chance" not in good["summary"]
    noise = score_predictors(_points(8, 4, informative=False, seed=1), features=["cohens_d"], permutations=200)
    assert noise["rules"][0]["permutation_p"] > 0.05
    assert "no diagnostic predicts the sign better than the majority beyond chance" in noise["summary"]


def test_fewer_than_two_starts_give_no_rule():
    record = score_predictors(_points(1, 4, informative=True), features=["cohens_d"], permutations=10)
    assert record["rules"] == [] and "fewer than two starts" in record["summary"]


def test_stored_sweeps_give_points_with_their_untuned_diagnostics(tmp_path):
    for sweep in STORED:
        if not sweep.is_dir():
            pytest.skip(f"{sweep} is not in this checkout")
    points = collect_points(STORED)
    groups = {(p.sweep, p.group) for p in points}
    assert ("fair_fight", "code-search-25600") in groups and ("positive_regime", "scifact") in groups
    budgets = {p.group: p.budget for p in points}
    assert budgets["code-search-25600"] == 25600 and budgets["code-search-2560"] == 2560
    point = next(p for p in points if (p.group, p.start, p.dataset) == ("code-search-25600", "splade", "stdlib"))
    stored = json.loads((STORED[1] / "starts.json").read_text())
    row = next(r for r in stored if (r["group"], r["start"], r["dataset"]) == ("code-search-25600", "splade", "stdlib"))
    assert point.deltas["qnorm"] == pytest.approx(row["heads"]["qnorm"]["mean"] - row["heads"]["cosine"]["mean"])
    assert point.diagnostics["cohens_d"] == pytest.approx(0.2538634653602412)  # positive_regime's untuned cell
    assert not any(p.diagnostics for p in points if p.dataset == "pypi-test")  # no untuned cell on it
    record_file = tmp_path / "splade" / "results.json"
    record_file.parent.mkdir()
    entry = {"document_norm_effect": {"cohens_d": 0.4}, "query_norm": {"cv": 0.1}, "document_norm": {"cv": 0.2}}
    fisher = {"kappa_query": 2.0, "kappa_document": 4.0, "log_kappa_ratio": -0.69}
    record_file.write_text(json.dumps({"start": "splade", "sets": {"pypi-test": {**entry, "fisher": fisher}}}))
    out = tmp_path / "signs.json"
    sweeps = ["--sweeps", *map(str, STORED)]
    record = main([*sweeps, "--diagnostics", str(record_file.parent), "--permutations", "20", "--output", str(out)])
    assert record == json.loads(out.read_text())
    filled = [p for p in record["points"] if p["start"] == "splade" and p["dataset"] == "pypi-test"]
    assert filled and all(p["diagnostics"]["log_kappa_ratio"] == -0.69 for p in filled)
    cohens = next(r for r in record["rules"] if (r["feature"], r["head"]) == ("cohens_d", "qnorm"))
    with_d = [p for p in record["points"] if "cohens_d" in p["diagnostics"]]
    assert cohens["starts"] == 3 and cohens["points"] == len(with_d)
