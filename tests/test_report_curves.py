"""Learning curves of a budget sweep: nDCG@10 and Cohen's d against the pairs seen, per start and test
set, a line per head through its seed mean with the seeds' range, from the protocol's compared groups."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from clipmag.results.record import build_results, write_results
from clipmag.scoring.head_record import HeadRecord
from clipmag_experiments.design.comparison import ComparisonProtocol
from clipmag_experiments.design.grid import SweepConfig, SweepGroup
from clipmag_experiments.design.protocol import record_start
from clipmag_experiments.report import build_report
from clipmag_experiments.report.collect import find_cells
from clipmag_experiments.report.curves import curve_points, pairs_seen

BATCH = 8
BUDGETS = {"budget-10": 10, "budget-40": 40, "budget-160": 160}


def _score(head: str, steps: int, seed: int) -> float:
    """cosine flat, qnorm climbing with the budget; seeds a point apart."""
    return 0.5 + (0.02 * (steps // 10).bit_length() if head == "qnorm" else 0.0) + 0.01 * seed


def _cell(root: Path, group: str, head: str, seed: int, steps: int, log: bool = True, learned: bool = False) -> None:
    folder = root / group / "start" / head / f"seed{seed}"
    folder.mkdir(parents=True)
    score = _score(head, steps, seed) + (0.05 if learned else 0.0)
    metric = {"NDCG@10": score, "diagnostics": {"document_norm_effect": {"cohens_d": 0.1 * seed}}}
    cell = {"group": group, "kind": "text", "model": "start", "head": head, "variant": None, "seed": seed}
    (folder / "cell.json").write_text(json.dumps({**cell, "argv": [], "evaluations": []}))
    run = {"steps": steps, "seed": seed, "world_size": 1}
    config = {"data": {"batch_size": BATCH}, "train": {"steps": steps, "seed": seed, "output_dir": str(folder)}}
    if learned:  # another arm at the same budget: the loss scale trained
        config["loss"] = {"learnable_scale": True}
    record = build_results(run, HeadRecord({"name": head}), {}, {"set": metric}, {}, {}, config=config)
    write_results(record, folder)
    if log:
        lines = [{"step": s, "kind": "train", "samples_seen": s * BATCH} for s in range(5, steps + 1, 5)]
        (folder / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def _runs(root: Path, arms: tuple[str, ...] = ()) -> Path:
    """The budgets of cosine and qnorm, and each arm in ``arms``: qnorm at the largest budget, its
    scale learned."""
    for group, steps in BUDGETS.items():
        for head in ("cosine", "qnorm"):
            for seed in (0, 1, 2):
                _cell(root, group, head, seed, steps, log=group != "budget-160")
    for seed in (0, 1, 2):
        _cell(root, "grid", "qnorm", seed, 40)  # a selection group: never a point
        for arm in arms:
            _cell(root, arm, "qnorm", seed, 160, log=False, learned=True)
    compared = [*BUDGETS, *arms]
    groups = [SweepGroup(name=g, heads=["cosine", "qnorm"]) for g in ("grid", *compared)]
    record_start(SweepConfig(output_dir=str(root), groups=groups, comparison=ComparisonProtocol(groups=compared)))
    return root


@pytest.fixture
def runs(tmp_path):
    return _runs(tmp_path)


def test_points_are_seed_means_with_their_range_at_the_pairs_each_budget_saw(runs):
    cells = find_cells(runs)
    assert {pairs_seen(c) for c in cells} == {80, 320, 1280}  # logged, or steps x batch without a log
    points = curve_points(runs, cells)
    assert [(p.head, p.pairs) for p in points] == [(h, n) for h in ("cosine", "qnorm") for n in (80, 320, 1280)]
    qnorm = [p for p in points if p.head == "qnorm"]
    for point, steps in zip(qnorm, BUDGETS.values()):
        assert point.ndcg == pytest.approx(
            (_score("qnorm", steps, 1), _score("qnorm", steps, 0), _score("qnorm", steps, 2))
        )
        assert point.cohens_d == pytest.approx((0.1, 0.0, 0.2))
    assert qnorm[-1].ndcg[0] - qnorm[0].ndcg[0] == pytest.approx(0.08)  # the gap to flat cosine grows


def test_the_report_draws_one_curve_figure_per_start_and_test_set(runs):
    report = build_report(runs, allow_mixed=True).read_text()
    figure = runs / "fig_curve_start_set.png"
    assert figure.is_file() and figure.stat().st_size > 5000
    assert "### Learning curve, start on set" in report and "fig_curve_start_set.png" in report


def test_without_a_declared_comparison_there_are_no_curves(runs):
    (runs / "sweep.json").unlink()
    assert curve_points(runs, find_cells(runs)) == []
    build_report(runs, allow_mixed=True)
    assert not (runs / "fig_curve_start_set.png").exists()


def test_an_arm_at_the_same_budget_is_a_line_of_its_own_not_averaged_into_the_head(tmp_path):
    runs = _runs(tmp_path, arms=("budget-160-learned",))
    points = [p for p in curve_points(runs, find_cells(runs)) if p.head == "qnorm"]
    assert [(p.line, p.pairs) for p in points] == [("qnorm", 80), ("qnorm", 320), ("qnorm", 1280)] + [
        ("qnorm (budget-160-learned)", 1280)
    ]
    fixed = np.array([_score("qnorm", 160, 1), _score("qnorm", 160, 0), _score("qnorm", 160, 2)])
    assert points[2].ndcg == pytest.approx(fixed) and points[3].ndcg == pytest.approx(fixed + 0.05)
