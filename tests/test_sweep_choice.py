"""A sweep group that takes each head's variant from an earlier group's results (a scale chosen on a
dev split): the choice is the best mean score, made when the cell runs, recorded in cell.json."""

from __future__ import annotations

import json

import pytest
import toy_frontend

from clipmag.experiments import sweep
from clipmag.experiments.grid import VariantChoice
from clipmag.frontends import FRONT_ENDS, FrontEnd

SCALES = [sweep.SweepVariant(name=f"scale{s}", args=[f"loss.scale={s}"]) for s in (1, 5, 20)]


@pytest.fixture
def toy_kind(monkeypatch):
    monkeypatch.setitem(FRONT_ENDS, "toy", FrontEnd("toy", "toy_frontend"))
    toy_frontend.CALLS.clear()
    yield


def _config(tmp_path, choose: VariantChoice) -> sweep.SweepConfig:
    heads = ["cosine", "dot", "qnorm"]
    grid = sweep.SweepGroup(name="scale-grid", kind="toy", heads=heads, variants=SCALES, seeds=[0])
    final = sweep.SweepGroup(name="final", kind="toy", heads=heads, seeds=[0, 1], args=["a=1"], choose_variant=choose)
    return sweep.SweepConfig(output_dir=str(tmp_path / "runs"), groups=[grid, final], args=["b=2"])


def test_each_head_runs_with_the_scale_its_dev_cells_chose(tmp_path, toy_kind):
    sweep.run_sweep(_config(tmp_path, VariantChoice(group="scale-grid")))
    final = [c for c in toy_frontend.CALLS if "a=1" in c]
    assert len(final) == 6
    for call in final:
        head = call[call.index("--norm") + 1]
        expected = f"loss.scale={int(toy_frontend.BEST_SCALE[head])}"
        assert [a for a in call if a.startswith("loss.scale=")] == [expected]
        assert call.index("a=1") < call.index(expected) < call.index("b=2")  # where a variant's args go
    cell = json.loads((tmp_path / "runs" / "final" / "default" / "dot" / "seed1" / "cell.json").read_text())
    assert cell["variant"] is None and cell["chosen"]["variant"] == "scale1"
    assert cell["chosen"]["args"] == ["loss.scale=1"] and set(cell["chosen"]["scores"]) == {
        "scale1",
        "scale5",
        "scale20",
    }
    assert cell["chosen"]["scores"]["scale1"] > cell["chosen"]["scores"]["scale20"]


def test_a_choice_needs_an_earlier_group_and_no_variants_of_its_own(tmp_path, toy_kind):
    cfg = _config(tmp_path, VariantChoice(group="final"))
    with pytest.raises(ValueError, match="choose_variant.group 'final' is not a group listed before it"):
        sweep.expand(cfg)
    cfg = _config(tmp_path, VariantChoice(group="scale-grid"))
    cfg.groups[1].variants = SCALES
    with pytest.raises(ValueError, match="either variants or choose_variant"):
        sweep.expand(cfg)


def test_a_choice_without_the_selection_results_is_refused(tmp_path, toy_kind):
    with pytest.raises(FileNotFoundError, match="choosing a variant needs its group finished first"):
        sweep.run_sweep(_config(tmp_path, VariantChoice(group="scale-grid")), only=["final"])
    with pytest.raises(ValueError, match="no 'Recall@5' for test set 'toy'"):
        sweep.run_sweep(_config(tmp_path, VariantChoice(group="scale-grid", metric="Recall@5")))
