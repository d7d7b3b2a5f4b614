"""Sweeps skip finished cells and resume a killed one; reports aggregate correctly."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import toy_frontend

from clipmag.registry.front_ends import FRONT_ENDS, FrontEnd
from clipmag_experiments.report import build_report
from clipmag_experiments.report.collect import find_cells, tidy_rows
from clipmag_experiments.report.tables import aggregate
from clipmag_experiments.sweep import run as sweep


@pytest.fixture
def toy_kind(monkeypatch):
    monkeypatch.setitem(FRONT_ENDS, "toy", FrontEnd("toy", "toy_frontend"))
    toy_frontend.CALLS.clear()
    toy_frontend.FAIL_ON.clear()
    yield


def _config(tmp_path) -> sweep.SweepConfig:
    group = sweep.SweepGroup(name="toy", kind="text", heads=["cosine", "qnorm", "dnorm"], seeds=[0, 1])
    group.kind = "toy"
    return sweep.SweepConfig(output_dir=str(tmp_path / "runs"), groups=[group])


def test_killed_sweep_resumes_without_redoing_finished_cells(tmp_path, toy_kind):
    cfg = _config(tmp_path)
    toy_frontend.FAIL_ON.add("dnorm")
    with pytest.raises(KeyboardInterrupt):
        sweep.run_sweep(cfg)
    assert len(toy_frontend.CALLS) == 5  # cosine x2, qnorm x2, then dnorm seed 0 is killed
    toy_frontend.FAIL_ON.clear()
    toy_frontend.CALLS.clear()
    sweep.run_sweep(cfg)
    rerun = [(c[c.index("--norm") + 1], c[c.index("--seed") + 1]) for c in toy_frontend.CALLS]
    assert rerun == [("dnorm", "0"), ("dnorm", "1")]
    assert all("--resume" in c and c[c.index("--resume") + 1] == "latest" for c in toy_frontend.CALLS)
    cell = json.loads((tmp_path / "runs" / "toy" / "default" / "qnorm" / "seed1" / "cell.json").read_text())
    assert cell["head"] == "qnorm" and cell["seed"] == 1


def test_sweep_config_is_checked(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("groups:\n  - name: g\n    heads: [cosine]\n    seed: [0]\n")
    with pytest.raises(ValueError, match="unknown key 'groups.seed'; valid keys of 'groups': name, kind"):
        sweep.load_sweep_config(path)


def test_report_tables_match_scipy_and_mark_the_best(tmp_path, toy_kind):
    cfg = _config(tmp_path)
    sweep.run_sweep(cfg)
    table = aggregate(tidy_rows(find_cells(cfg.output_dir)), ("NDCG@10",))
    (row,) = table
    cos, q = np.array([0.5, 0.51]), np.array([0.45, 0.46])
    assert row.cells["cosine"].mean == pytest.approx(cos.mean()) and row.cells["cosine"].std == pytest.approx(
        cos.std(ddof=1)
    )
    assert row.cells["qnorm"].change_vs_baseline == pytest.approx((q.mean() - cos.mean()) / cos.mean())
    assert row.cells["qnorm"].p_seeds is None  # constant differences: the paired t-test is undefined
    assert row.cells["cosine"].best and not row.cells["dnorm"].best
    report = build_report(cfg.output_dir, allow_mixed=True).read_text()
    assert "## Retrieval (test splits)" in report and "**50.50 ± 0.71**" in report
    assert "best mean nDCG@10 is **cosine**" in report
    assert (tmp_path / "runs" / "fig_ndcg.png").is_file() and (tmp_path / "runs" / "table_retrieval.csv").is_file()


def test_sweep_wide_args_follow_every_cells_own():
    demo = Path(__file__).resolve().parents[1] / "configs" / "sweeps" / "demo.yaml"
    cfg = sweep.load_sweep_config(demo, ["output_dir=runs/x", "args=[train.threads=1]"])
    for cell in sweep.expand(cfg):
        argv = cell.argv
        assert argv.count("train.threads=1") == 1 and str(cell.directory).startswith("runs/x/")
        assert argv.index("train.threads=1") > argv.index("train.threads=2")  # after the group's, so it wins
