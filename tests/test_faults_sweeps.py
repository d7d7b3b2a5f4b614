"""A sweep checks every cell with its front end's own config before the first one trains, and a cell
that fails while it runs stops none of the others: one line names it and its log."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import toy_frontend
from conftest import TESTS

from clipmag.config.entry import run_entry_point
from clipmag.errors import ConfigError
from clipmag.registry.config_packages import config_path
from clipmag.registry.front_ends import FRONT_ENDS, FrontEnd
from clipmag_experiments.cli import sweep_main
from clipmag_experiments.design.expansion import expand
from clipmag_experiments.design.selection import check_only, selected
from clipmag_experiments.sweep import run as sweep


def _sweep_file(tmp_path, heads: str, evaluations: str = "") -> str:
    path = tmp_path / "heads.yaml"
    path.write_text(
        f"output_dir: {tmp_path / 'runs'}\n"
        "groups:\n"
        "  - name: code\n"
        "    kind: text\n"
        f"    heads: [{heads}]\n"
        "    args: [train.steps=1]\n" + evaluations
    )
    return str(path)


def test_a_typo_in_the_last_head_stops_the_sweep_before_any_cell_runs(tmp_path):
    path = _sweep_file(tmp_path, "cosine, dot, cosin")
    with pytest.raises(ConfigError) as err:
        sweep_main(["--config", path])
    assert str(err.value).startswith(f"{path}: group 'code', cell code/cosin/seed0: key 'head.name' expects")
    assert "command line" not in str(err.value)
    assert not (tmp_path / "runs" / "code").exists()  # no cell started, none wrote its description


def test_an_evaluation_argument_out_of_range_is_found_before_training(tmp_path):
    evaluations = "    evaluations:\n      - kind: rag\n        args: [--data, bundled, --top-k, '0']\n"
    path = _sweep_file(tmp_path, "cosine", evaluations)
    with pytest.raises(ConfigError, match=r"cell code/cosine/seed0: key 'reader.top_k' expects int >= 1, got 0"):
        sweep_main(["--config", path])


def test_only_must_name_groups_of_the_sweep(tmp_path):
    cfg = sweep.load_sweep_config(_sweep_file(tmp_path, "cosine"))
    with pytest.raises(ConfigError, match=r"--only names txt, which is not a group \(groups: code\)"):
        sweep.run_sweep(cfg, ["txt"], source="heads.yaml")
    with pytest.raises(
        ConfigError, match=r"--only names code/minilm, but group 'code' has no model 'minilm' \(models: none"
    ):
        sweep.run_sweep(cfg, ["code/minilm"], source="heads.yaml")


def test_only_picks_one_models_cells_of_a_group():
    """``group/model`` selects that start's cells and nothing else (the powered fight runs its
    fp32 starts on any CPU and SPLADE's bf16 cells only where the CPU has bf16 units)."""
    cfg = sweep.load_sweep_config(config_path("configs/sweeps/powered_fight.yaml"))
    picked = [c for c in expand(cfg) if selected(c, ["start/minilm", "tune/splade"])]
    assert {(c.group, c.model) for c in picked} == {("start", "minilm"), ("tune", "splade")}
    assert sum(c.group == "start" for c in picked) == 4  # one step-0 cell per head
    assert [c for c in expand(cfg) if selected(c, ["tune"])] == [c for c in expand(cfg) if c.group == "tune"]
    assert not [c for c in expand(cfg) if selected(c, ["tune/minilm"]) if c.model == "minilm-dot"]  # not a prefix
    with pytest.raises(
        ConfigError,
        match=r"--only names tune/bert, but group 'tune' has no model 'bert' \(models: splade, minilm-dot, minilm\)",
    ):
        check_only(cfg, ["tune/bert"], "powered_fight.yaml")


def test_only_picks_one_heads_cells_of_a_model():
    """``group/model/head`` selects that head's cells of one start, every rate and seed (so a sitting
    can run the heads a cut order keeps before the one it drops first), and a head the group lacks,
    or a fourth part, is refused with the forms it accepts."""
    cfg = sweep.load_sweep_config(config_path("configs/sweeps/powered_fight.yaml"))
    picked = [c for c in expand(cfg) if selected(c, ["tune/minilm/qnorm"])]
    assert {(c.group, c.model, c.head) for c in picked} == {("tune", "minilm", "qnorm")}
    assert {c.variant for c in picked} >= {"lr2e-5", "lr6e-5", "lr2e-4"} and {c.seed for c in picked} == {0, 1}
    for entry in ("tune/minilm/cosin", "tune/minilm/qnorm/seed0"):
        with pytest.raises(ConfigError, match=r"write group, group/model or group/model/head \(heads of 'tune': cos"):
            check_only(cfg, [entry], "powered_fight.yaml")


def test_a_sweep_without_groups_asks_for_its_file():
    with pytest.raises(ConfigError, match="the sweep has no groups; give its YAML with --config"):
        sweep_main([])


@pytest.fixture
def toy_kind(monkeypatch):
    """The toy trainer as front end ``toy``, importable by torchrun's processes too."""
    monkeypatch.setitem(FRONT_ENDS, "toy", FrontEnd("toy", "toy_frontend"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS), str(TESTS.parent)]))
    toy_frontend.CALLS.clear()


def _broken_cell_sweep(tmp_path, launcher: str) -> str:
    """Three groups of one cell each; the middle one's (``b/qnorm/seed0``) breaks."""
    path = tmp_path / "broken.yaml"
    path.write_text(
        f"output_dir: {tmp_path / 'runs'}\n"
        f"launcher: {launcher}\n"
        "groups:\n"
        "  - {name: a, kind: toy, heads: [cosine]}\n"
        "  - {name: b, kind: toy, heads: [qnorm], args: [toy.fail=1]}\n"
        "  - {name: c, kind: toy, heads: [dnorm]}\n"
    )
    return str(path)


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["inprocess", "torchrun"])
def test_a_failed_cell_is_one_line_the_other_cells_run_and_a_rerun_resumes_it(tmp_path, toy_kind, capsys, launcher):
    path = _broken_cell_sweep(tmp_path, launcher)
    with pytest.raises(SystemExit) as stop:
        run_entry_point(sweep_main, ["--config", path])
    assert stop.value.code == 2
    runs = tmp_path / "runs"
    log = runs / "b" / "default" / "qnorm" / "seed0" / "cell.log"
    err = capsys.readouterr().err
    (last,) = [line for line in err.splitlines() if line.startswith("error:")]
    why = "exit status 1" if launcher == "torchrun" else "RuntimeError: toy trainer broke while running qnorm"
    assert last == (
        f"error: sweep cells did not finish: b/qnorm/seed0 ({why}; its log: {log}). "
        "Fix the cause and run the same command again: finished cells are skipped, the others resume"
    )
    assert f"b/qnorm/seed0: failed ({why}; its log: {log}); the sweep goes on without it" in err
    assert "Traceback" not in err
    assert "Traceback" in log.read_text() and "toy trainer broke while running qnorm" in log.read_text()
    done = [p.relative_to(runs).parts[0] for p in sorted(runs.glob("*/default/*/seed0/results.json"))]
    assert done == ["a", "c"]  # the cells before and after the broken one
    Path(path).write_text(Path(path).read_text().replace("toy.fail=1", "toy.fixed=1"))
    toy_frontend.CALLS.clear()
    run_entry_point(sweep_main, ["--config", path])
    assert (log.parent / "results.json").is_file()
    if launcher == "inprocess":
        assert [call[call.index("--norm") + 1] for call in toy_frontend.CALLS] == ["qnorm"]
