"""clipmag-rerun-cell re-runs a finished cell from its record into a fresh folder and compares."""

from __future__ import annotations

import json

import pytest

from clipmag.experiments import sweep
from clipmag.experiments.rerun import compare_metrics, rerun_main
from clipmag.frontends import FRONT_ENDS, FrontEnd


@pytest.fixture
def cell(monkeypatch, tmp_path):
    monkeypatch.setitem(FRONT_ENDS, "toy", FrontEnd("toy", "toy_frontend"))
    group = sweep.SweepGroup(name="toy", kind="toy", heads=["qnorm"], seeds=[1])
    sweep.run_sweep(sweep.SweepConfig(output_dir=str(tmp_path / "runs"), groups=[group]))
    return tmp_path / "runs" / "toy" / "default" / "qnorm" / "seed1"


def test_a_rerun_matches_its_record_and_leaves_the_cell_alone(cell, tmp_path, capsys):
    before = (cell / "results.json").read_bytes()
    rows = rerun_main([str(cell), "--output", str(tmp_path / "again")])
    assert rows and all(within for *_, within in rows) and {r[1] for r in rows} == {"NDCG@10", "MRR@10"}
    assert (cell / "results.json").read_bytes() == before and (tmp_path / "again" / "results.json").is_file()
    assert "2 of 2 metrics agree" in capsys.readouterr().out


def test_a_changed_number_is_a_mismatch_with_exit_status_1(cell, tmp_path, capsys):
    record = json.loads((cell / "results.json").read_text())
    record["metrics"]["toy"]["NDCG@10"] += 0.05
    (cell / "results.json").write_text(json.dumps(record))
    with pytest.raises(SystemExit) as err:
        rerun_main([str(cell), "--output", str(tmp_path / "again")])
    assert err.value.code == 1 and "MISMATCH" in capsys.readouterr().out


def test_the_tolerance_applies_only_where_conditions_differ():
    stored = {"metrics": {"d": {"NDCG@10": 0.5, "per_query": {}}}}
    rerun = {"metrics": {"d": {"NDCG@10": 0.504}}}
    assert compare_metrics(stored, rerun, 0.0)[0][-1] is False
    assert compare_metrics(stored, rerun, 0.01)[0][-1] is True


def test_the_stored_cell_is_never_the_output(cell):
    with pytest.raises(ValueError, match="is the stored cell itself"):
        rerun_main([str(cell), "--output", str(cell)])
