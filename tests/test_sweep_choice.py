"""A sweep group that takes each head's variant from an earlier group's results (a scale chosen on a
dev split): the choice is the best mean score, made when the cell runs, recorded in cell.json."""

from __future__ import annotations

import json
import math

import pytest
import toy_frontend

from clipmag.registry.front_ends import FRONT_ENDS, FrontEnd
from clipmag_experiments.design.grid import GridExtension, VariantChoice
from clipmag_experiments.slurm.jobs import SweepUnfinished
from clipmag_experiments.sweep import run as sweep

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
    assert cell["chosen"]["at_grid_edge"] is True  # scale1 is the grid's first: the optimum may be smaller
    middle = json.loads((tmp_path / "runs" / "final" / "default" / "qnorm" / "seed0" / "cell.json").read_text())
    assert middle["chosen"]["variant"] == "scale5" and middle["chosen"]["at_grid_edge"] is False


def test_a_choice_can_read_the_candidates_validation_scores(tmp_path, toy_kind):
    """``dataset: validation`` reads what each run kept for its checkpoint (the toy's dev split
    disagrees with its test set, so each head takes the scale that test would rank last)."""
    sweep.run_sweep(_config(tmp_path, VariantChoice(group="scale-grid", dataset="validation")))
    cosine = json.loads((tmp_path / "runs" / "final" / "default" / "cosine" / "seed0" / "cell.json").read_text())
    assert cosine["chosen"]["variant"] == "scale1" and cosine["chosen"]["dataset"] == "validation"
    assert cosine["chosen"]["scores"]["scale1"] == pytest.approx(1.0 - (0.5 - 0.01 * abs(math.log(1 / 20))))


def test_a_choice_needs_an_earlier_group(tmp_path, toy_kind):
    cfg = _config(tmp_path, VariantChoice(group="final"))
    with pytest.raises(ValueError, match="choose_variant.group 'final' is not a group listed before it"):
        sweep.expand(cfg)


LRS = [sweep.SweepVariant(name=f"lr{lr}", args=[f"optim.lr={lr}"]) for lr in ("1e-5", "1e-4")]


def test_a_rate_chosen_on_cosine_carries_through_a_scale_grid_to_every_head(tmp_path, toy_kind, monkeypatch):
    """lr grid on cosine -> scale grid of every head at that rate -> each head at its scale and that rate."""
    monkeypatch.setitem(toy_frontend.BEST_LR, "cosine", 1e-4)
    heads = ["cosine", "qnorm"]
    lr_grid = sweep.SweepGroup(name="lr-grid", kind="toy", heads=["cosine"], variants=LRS)
    on_cosine = VariantChoice(group="lr-grid", head="cosine")
    scale_grid = sweep.SweepGroup(name="scale-grid", kind="toy", heads=heads, variants=SCALES, choose_variant=on_cosine)
    final = sweep.SweepGroup(
        name="final", kind="toy", heads=heads, args=["a=1"], choose_variant=VariantChoice("scale-grid")
    )
    sweep.run_sweep(sweep.SweepConfig(output_dir=str(tmp_path / "runs"), groups=[lr_grid, scale_grid, final]))
    grid_calls = [c for c in toy_frontend.CALLS if any(a.startswith("loss.scale=") for a in c) and "a=1" not in c]
    assert len(grid_calls) == 6 and all("optim.lr=1e-4" in c for c in grid_calls)  # the rate cosine chose
    for call in grid_calls:
        assert call.index("optim.lr=1e-4") < next(i for i, a in enumerate(call) if a.startswith("loss.scale="))
    for call in (c for c in toy_frontend.CALLS if "a=1" in c):
        head = call[call.index("--norm") + 1]
        assert "optim.lr=1e-4" in call and f"loss.scale={int(toy_frontend.BEST_SCALE[head])}" in call
    runs = tmp_path / "runs"
    grid_cell = json.loads((runs / "scale-grid" / "default" / "qnorm-scale5" / "seed0" / "cell.json").read_text())
    assert grid_cell["variant"] == "scale5" and grid_cell["chosen"]["head"] == "cosine"
    assert grid_cell["chosen"]["variant"] == "lr1e-4" and grid_cell["chosen"]["args"] == ["optim.lr=1e-4"]
    final_cell = json.loads((runs / "final" / "default" / "qnorm" / "seed0" / "cell.json").read_text())
    assert final_cell["chosen"]["args"] == ["optim.lr=1e-4", "loss.scale=5"]


def test_a_choice_without_the_selection_results_is_refused(tmp_path, toy_kind):
    with pytest.raises(SweepUnfinished, match="choosing a variant needs its group finished first"):
        sweep.run_sweep(_config(tmp_path, VariantChoice(group="scale-grid")), only=["final"])
    with pytest.raises(SweepUnfinished, match="no 'Recall@5' for test set 'toy'"):
        sweep.run_sweep(_config(tmp_path, VariantChoice(group="scale-grid", metric="Recall@5")))


def _resolve_toy(argv):
    """A ``parse_args`` for the toy trainer: every option and key, the loss scale defaulting to 20."""
    argv = list(argv)
    resolved = {argv[i][2:]: argv[i + 1] for i in range(len(argv) - 1) if argv[i].startswith("--")}
    resolved |= dict(a.split("=", 1) for a in argv if "=" in a and not a.startswith("--"))
    resolved["loss.scale"] = float(resolved.get("loss.scale", 20))
    return resolved


def test_a_chosen_cell_that_is_an_earlier_run_takes_its_results_instead_of_training(tmp_path, toy_kind, monkeypatch):
    monkeypatch.setattr(toy_frontend, "parse_args", _resolve_toy, raising=False)
    cfg = _config(tmp_path, VariantChoice(group="scale-grid"))
    paper = sweep.SweepGroup(name="paper", kind="toy", heads=["cosine", "dot", "qnorm"], seeds=[0, 1], args=["a=1"])
    cfg.groups.insert(1, paper)  # scale 20 for every head, as the chosen cells' own arguments but the scale
    sweep.run_sweep(cfg)
    final = [c for c in toy_frontend.CALLS if "a=1" in c and any(a.startswith("loss.scale=") for a in c)]
    assert sorted({c[c.index("--norm") + 1] for c in final}) == ["dot", "qnorm"]  # cosine chose 20: not trained
    runs = tmp_path / "runs"
    for seed in (0, 1):
        shared = runs / "final" / "default" / "cosine" / f"seed{seed}"
        cell = json.loads((shared / "cell.json").read_text())
        assert cell["same_run_as"] == str(runs / "paper" / "default" / "cosine" / f"seed{seed}")
        assert cell["chosen"]["variant"] == "scale20"
        paper_results = runs / "paper" / "default" / "cosine" / f"seed{seed}" / "results.json"
        assert (shared / "results.json").read_bytes() == paper_results.read_bytes()
    assert "same_run_as" not in json.loads((runs / "final" / "default" / "dot" / "seed0" / "cell.json").read_text())
    calls = len(toy_frontend.CALLS)
    sweep.run_sweep(cfg)  # resumed: every cell, shared ones included, is finished
    assert len(toy_frontend.CALLS) == calls
    cfg.reuse_same_runs = False
    for seed in (0, 1):
        (runs / "final" / "default" / "cosine" / f"seed{seed}" / "results.json").unlink()
    sweep.run_sweep(cfg)
    assert len(toy_frontend.CALLS) == calls + 2  # asked not to share: trained


def test_a_chosen_cell_shares_the_run_of_a_grid_cell_that_chose_its_own_rate(tmp_path, toy_kind, monkeypatch):
    """rate grid on cosine -> scale grid of every head at that rate -> each head's seed 0 at its
    chosen scale is the scale grid's cell it chose (both ran the rate and the scale): not trained again."""
    monkeypatch.setattr(toy_frontend, "parse_args", _resolve_toy, raising=False)
    heads = ["cosine", "qnorm"]
    lr_grid = sweep.SweepGroup(name="lr-grid", kind="toy", heads=["cosine"], variants=LRS)
    on_cosine = VariantChoice(group="lr-grid", head="cosine")
    scale_grid = sweep.SweepGroup(name="scale-grid", kind="toy", heads=heads, variants=SCALES, choose_variant=on_cosine)
    final = sweep.SweepGroup(
        name="final", kind="toy", heads=heads, seeds=[0, 1], choose_variant=VariantChoice("scale-grid")
    )
    sweep.run_sweep(sweep.SweepConfig(output_dir=str(tmp_path / "runs"), groups=[lr_grid, scale_grid, final]))
    runs = tmp_path / "runs"
    final_cell = {h: json.loads((runs / "final" / "default" / h / "seed0" / "cell.json").read_text()) for h in heads}
    # qnorm at scale 5 and the rate cosine chose: only the scale-grid cell that chose that rate ran it
    assert final_cell["qnorm"]["same_run_as"] == str(runs / "scale-grid" / "default" / "qnorm-scale5" / "seed0")
    assert final_cell["cosine"]["same_run_as"]  # scale 20 is also the rate grid's own setting: either run
    for head in heads:
        assert "same_run_as" not in json.loads((runs / "final" / "default" / head / "seed1" / "cell.json").read_text())
    assert len([c for c in toy_frontend.CALLS if "--seed" in c and c[c.index("--seed") + 1] == "1"]) == 2


def _scale(value: int) -> sweep.SweepVariant:
    return sweep.SweepVariant(name=f"scale{value}", args=[f"loss.scale={value}"])


def test_a_choice_on_a_grid_edge_runs_the_extension_and_chooses_again(tmp_path, toy_kind):
    """Best scales: cosine 20 (inside once 50 ran), qnorm 5 (inside once 2 ran), dot 1 (two steps out)."""
    heads = ["cosine", "dot", "qnorm"]
    extend = GridExtension(low=[_scale(2), _scale(1)], high=[_scale(50), _scale(100)])
    grid = sweep.SweepGroup(name="scale-grid", kind="toy", heads=heads, variants=[_scale(5), _scale(20)], extend=extend)
    final = sweep.SweepGroup(
        name="final", kind="toy", heads=heads, args=["a=1"], choose_variant=VariantChoice("scale-grid")
    )
    sweep.run_sweep(sweep.SweepConfig(output_dir=str(tmp_path / "runs"), groups=[grid, final]))
    grid_runs = {
        (c[c.index("--norm") + 1], next(a for a in c if a.startswith("loss.scale=")))
        for c in toy_frontend.CALLS
        if "a=1" not in c
    }
    assert {s for h, s in grid_runs if h == "cosine"} == {"loss.scale=5", "loss.scale=20", "loss.scale=50"}
    assert {s for h, s in grid_runs if h == "qnorm"} == {"loss.scale=5", "loss.scale=20", "loss.scale=2"}
    assert {s for h, s in grid_runs if h == "dot"} == {f"loss.scale={s}" for s in (5, 20, 2, 1)}
    runs = tmp_path / "runs"
    chosen = {
        h: json.loads((runs / "final" / "default" / h / "seed0" / "cell.json").read_text())["chosen"] for h in heads
    }
    assert chosen["cosine"]["variant"] == "scale20" and chosen["cosine"]["extended"] == ["scale50"]
    assert chosen["qnorm"]["variant"] == "scale5" and chosen["qnorm"]["grid"] == ["scale2", "scale5", "scale20"]
    assert chosen["dot"]["variant"] == "scale1" and chosen["dot"]["extended"] == ["scale2", "scale1"]
    assert chosen["dot"]["args"] == ["loss.scale=1"]
    unneeded = json.loads((runs / "scale-grid" / "default" / "cosine-scale100" / "seed0" / "cell.json").read_text())
    assert unneeded["extends"] == {"edge": "high", "step": 2}
    assert not (runs / "scale-grid" / "default" / "cosine-scale100" / "seed0" / "results.json").exists()


def test_a_choice_must_read_what_the_extension_reads(tmp_path, toy_kind):
    extend = GridExtension(high=[_scale(50)], metric="MRR@10")
    grid = sweep.SweepGroup(name="scale-grid", kind="toy", heads=["cosine"], variants=SCALES, extend=extend)
    final = sweep.SweepGroup(name="final", kind="toy", heads=["cosine"], choose_variant=VariantChoice("scale-grid"))
    with pytest.raises(ValueError, match="choose by what the extension reads"):
        sweep.expand(sweep.SweepConfig(output_dir=str(tmp_path / "runs"), groups=[grid, final]))


def test_a_diverged_candidate_is_run_once_and_never_chosen(tmp_path, toy_kind, monkeypatch):
    """cosine's extension 50 diverges: 20 stays its choice, inside the grid as read; qnorm's 20
    diverges: 5, then on the low edge, runs the extension 2 and stays. Neither divergence fails the
    sweep, and a rerun does not run them again."""
    monkeypatch.setattr(toy_frontend, "DIVERGE_AT", {("cosine", 50.0), ("qnorm", 20.0)})
    heads = ["cosine", "qnorm"]
    extend = GridExtension(low=[_scale(2)], high=[_scale(50)])
    grid = sweep.SweepGroup(name="scale-grid", kind="toy", heads=heads, variants=[_scale(5), _scale(20)], extend=extend)
    final = sweep.SweepGroup(
        name="final", kind="toy", heads=heads, args=["a=1"], choose_variant=VariantChoice("scale-grid")
    )
    cfg = sweep.SweepConfig(output_dir=str(tmp_path / "runs"), groups=[grid, final])
    sweep.run_sweep(cfg)
    runs = tmp_path / "runs"
    chosen = {
        h: json.loads((runs / "final" / "default" / h / "seed0" / "cell.json").read_text())["chosen"] for h in heads
    }
    assert chosen["cosine"]["variant"] == "scale20" and chosen["cosine"]["diverged"] == ["scale50"]
    assert chosen["cosine"]["grid"] == ["scale5", "scale20", "scale50"] and chosen["cosine"]["at_grid_edge"] is False
    assert set(chosen["cosine"]["scores"]) == {"scale5", "scale20"}  # a diverged run has no score to store
    assert chosen["qnorm"]["variant"] == "scale5" and chosen["qnorm"]["diverged"] == ["scale20"]
    assert chosen["qnorm"]["extended"] == ["scale2"]
    calls = len(toy_frontend.CALLS)
    sweep.run_sweep(cfg)
    assert len(toy_frontend.CALLS) == calls  # the diverged cells are an outcome, not an interruption


def test_a_grid_whose_every_setting_diverged_has_nothing_to_choose(tmp_path, toy_kind, monkeypatch):
    monkeypatch.setattr(toy_frontend, "DIVERGE_AT", {("cosine", 5.0), ("cosine", 20.0)})
    grid = sweep.SweepGroup(name="scale-grid", kind="toy", heads=["cosine"], variants=[_scale(5), _scale(20)])
    final = sweep.SweepGroup(name="final", kind="toy", heads=["cosine"], choose_variant=VariantChoice("scale-grid"))
    with pytest.raises(SweepUnfinished, match="every setting of group 'scale-grid' read for head cosine diverged"):
        sweep.run_sweep(sweep.SweepConfig(output_dir=str(tmp_path / "runs"), groups=[grid, final]))


def test_an_unneeded_extension_says_whether_the_best_is_inside_the_grid_or_still_on_its_edge(
    tmp_path, toy_kind, caplog
):
    """dot's best walks to scale1, the last low extension: its unneeded high extensions say that the
    best is still on the low edge, not that it is inside the grid; cosine's (20, inside) says inside."""
    extend = GridExtension(low=[_scale(2), _scale(1)], high=[_scale(50), _scale(100)])
    grid = sweep.SweepGroup(
        name="scale-grid", kind="toy", heads=["cosine", "dot"], variants=[_scale(5), _scale(20)], extend=extend
    )
    with caplog.at_level("INFO", logger="clipmag"):
        sweep.run_sweep(sweep.SweepConfig(output_dir=str(tmp_path / "runs"), groups=[grid]))
    lines = [r.getMessage() for r in caplog.records if "grid extension not needed" in r.getMessage()]
    dot = "the best of the grid read (scale1 of scale1, scale2, scale5, scale20) is still on its low edge"
    assert any("scale-grid/dot-scale50/seed0" in line and dot in line for line in lines), lines
    assert not any("dot-" in line and "is inside it" in line for line in lines), lines
    cosine = "the best of the grid read (scale20 of scale5, scale20, scale50) is inside it"
    assert any("cosine-scale100" in line and cosine in line for line in lines), lines
