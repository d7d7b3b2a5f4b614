"""Sweep preparation steps, optional groups, labelled models and per-model arguments."""

from __future__ import annotations

import dataclasses
import importlib
import json
import logging

import pytest
import toy_frontend
import toy_prepare

from clipmag.errors import ConfigError
from clipmag.registry.front_ends import FRONT_ENDS, FrontEnd
from clipmag_experiments.sweep import run as sweep


@pytest.fixture
def toy_kind(monkeypatch):
    monkeypatch.setitem(FRONT_ENDS, "toy", FrontEnd("toy", "toy_frontend"))
    toy_frontend.CALLS.clear()
    toy_prepare.CALLS.clear()


def _step(tmp_path, **extra) -> sweep.SweepStep:
    target = str(tmp_path / "prepared" / "done.txt")
    return sweep.SweepStep(name="make", module="toy_prepare", args=[target], creates=target, **extra)


def test_a_prepare_step_runs_once_and_is_skipped_when_its_output_exists(tmp_path, toy_kind):
    cfg = sweep.SweepConfig(output_dir=str(tmp_path / "runs"), prepare=[_step(tmp_path)])
    sweep.run_sweep(cfg)
    sweep.run_sweep(cfg)
    assert toy_prepare.CALLS == [[str(tmp_path / "prepared" / "done.txt")]]


def test_steps_and_groups_whose_inputs_are_absent_are_skipped_with_a_line(tmp_path, toy_kind, caplog):
    absent = str(tmp_path / "no-such-data")
    group = sweep.SweepGroup(name="needs-data", kind="toy", heads=["cosine"], requires=[absent])
    kept = sweep.SweepGroup(name="plain", kind="toy", heads=["cosine"])
    cfg = sweep.SweepConfig(
        output_dir=str(tmp_path / "runs"), prepare=[_step(tmp_path, requires=[absent])], groups=[group, kept]
    )
    with caplog.at_level(logging.WARNING, logger="clipmag"):
        cells = sweep.run_sweep(cfg)
    assert toy_prepare.CALLS == [] and [c.group for c in cells] == ["plain"]
    assert f"sweep group needs-data: skipped, {absent} not found" in caplog.text
    assert f"prepare make: skipped, {absent} not found" in caplog.text


def test_labelled_models_name_folders_and_cells_and_take_their_own_args(tmp_path, toy_kind):
    group = sweep.SweepGroup(
        name="starts",
        kind="toy",
        heads=["cosine"],
        models=["fast=runs/stage1/export", "hub/base-model"],
        model_args={"fast": ["optim.lr=2e-4"]},
    )
    cfg = sweep.SweepConfig(output_dir=str(tmp_path / "runs"), groups=[group])
    labelled, plain = sweep.expand(cfg)
    assert labelled.directory.parts[-4:] == ("starts", "fast", "cosine", "seed0")
    assert labelled.argv[labelled.argv.index("--model") + 1] == "runs/stage1/export"
    assert "optim.lr=2e-4" in labelled.argv and "optim.lr=2e-4" not in plain.argv
    assert plain.directory.parts[-3] == "base-model" and plain.model == "hub/base-model"
    sweep.run_sweep(cfg)
    assert json.loads((labelled.directory / "cell.json").read_text())["model"] == "fast"


def test_model_args_for_an_unknown_label_are_an_error(tmp_path):
    group = sweep.SweepGroup(name="g", kind="text", heads=["cosine"], models=["a=x"], model_args={"b": ["k=v"]})
    with pytest.raises(ValueError, match="model_args for b, which is not a model label of the group \\(a\\)"):
        sweep.expand(sweep.SweepConfig(groups=[group]))


def test_the_positive_regime_sweep_expands_as_documented():
    from clipmag.registry.config_packages import config_path

    cfg = sweep.load_sweep_config(config_path("configs/sweeps/positive_regime.yaml"))
    cells = sweep.expand(cfg)
    assert [s.name for s in cfg.prepare] == ["package-pairs", "stage1", "scifact-train-shards"]
    assert all(callable(importlib.import_module(step.module).main) for step in cfg.prepare)
    fine_tuned = [c for c in cells if c.group == "code-search"]
    assert len(fine_tuned) == 3 * 5 * 3 and {c.model for c in fine_tuned} == {"splade", "minilm-dot", "minilm"}
    assert all(("optim.lr=2.0e-4" in c.argv) == (c.model == "splade") for c in fine_tuned)
    untuned = [c for c in cells if c.group.endswith("-untuned")]
    assert untuned and all("train.steps=0" in c.argv and c.evaluations[0].kind == "predict" for c in untuned)


def test_archive_copies_the_small_files_of_finished_cells_and_the_report_reads_them(tmp_path, toy_kind):
    from clipmag_experiments.report import build_report
    from clipmag_experiments.sweep.archive import archive_results

    cfg = sweep.SweepConfig(
        output_dir=str(tmp_path / "runs"), groups=[sweep.SweepGroup(name="g", kind="toy", heads=["cosine", "dot"])]
    )
    sweep.run_sweep(cfg)
    (tmp_path / "runs" / "g" / "default" / "cosine" / "seed0" / "checkpoints").mkdir()
    (tmp_path / "runs" / "g" / "default" / "cosine" / "seed0" / "checkpoints" / "latest.pt").write_bytes(b"x" * 100)
    copied = archive_results(tmp_path / "runs", tmp_path / "kept")
    assert sorted(p.name for p in copied) == ["cell.json", "cell.json", "results.json", "results.json", "sweep.json"]
    assert archive_results(tmp_path / "runs", tmp_path / "kept") == []  # unchanged files are not copied again
    assert "best mean nDCG@10 is **cosine**" in build_report(tmp_path / "kept", allow_mixed=True).read_text()


def test_a_start_rebuilt_otherwise_on_a_later_sitting_is_refused_before_any_cell(tmp_path, toy_kind):
    target = tmp_path / "prepared" / "done.txt"
    group = sweep.SweepGroup(name="plain", kind="toy", heads=["cosine"])
    cfg = sweep.SweepConfig(
        output_dir=str(tmp_path / "runs"), prepare=[_step(tmp_path, fingerprint=[str(target)])], groups=[group]
    )
    sweep.run_sweep(cfg)
    target.unlink()  # a fresh machine: the step builds its start again, the same bytes
    sweep.run_sweep(cfg)
    starts = json.loads((tmp_path / "runs" / "sweep.json").read_text())["starts"]
    digests = [start["prepared"]["make"][str(target)] for start in starts]
    assert len(digests) == 2 and digests[0] == digests[1]
    target.write_text("trained otherwise\n")  # a rebuild that came out other bytes
    later = sweep.SweepGroup(name="later", kind="toy", heads=["cosine"])  # a cell not yet run
    ran = len(toy_frontend.CALLS)
    with pytest.raises(ConfigError, match=r"prepare step 'make' built .*done\.txt anew and it differs"):
        sweep.run_sweep(dataclasses.replace(cfg, groups=[group, later]))
    assert len(toy_frontend.CALLS) == ran


def test_a_sitting_on_some_starts_prepares_only_what_their_cells_read(tmp_path, toy_kind):
    """A start built by a prepare step (here from data an earlier step makes, named in its config
    file) is not rebuilt, nor fingerprinted anew, by a sitting that runs only another start's cells."""
    data, start = tmp_path / "data" / "done.txt", tmp_path / "start" / "done.txt"
    config = tmp_path / "start.yaml"
    config.write_text(f"data:\n  train: {tmp_path / 'data' / 'shards'}\n")
    steps = [
        sweep.SweepStep(name="data", module="toy_prepare", args=[str(data)], creates=str(data)),
        sweep.SweepStep(
            name="start",
            module="toy_prepare",
            args=[str(start), "--config", str(config)],
            creates=str(start),
            fingerprint=[str(start)],
        ),
    ]
    group = sweep.SweepGroup(
        name="fight", kind="toy", heads=["cosine"], models=[f"built={tmp_path / 'start'}", "shipped=hub/base"]
    )
    cfg = sweep.SweepConfig(output_dir=str(tmp_path / "runs"), prepare=steps, groups=[group])
    sweep.run_sweep(cfg, only=["fight/shipped"])
    assert toy_prepare.CALLS == [] and len(toy_frontend.CALLS) == 1
    assert not json.loads((tmp_path / "runs" / "sweep.json").read_text())["starts"][-1].get("prepared")
    sweep.run_sweep(cfg, only=["fight/built"])
    assert toy_prepare.CALLS == [[str(data)], [str(start), "--config", str(config)]]
    sweep.run_sweep(cfg)  # every cell: both steps' outputs exist, nothing is built again
    assert len(toy_prepare.CALLS) == 2


@pytest.mark.parametrize(
    ("config", "only", "steps"),
    [
        ("powered_fight", ["tune/splade", "fight/splade"], ["pypi-pairs"]),
        ("powered_fight", ["start/minilm-dot"], ["pypi-pairs", "package-pairs", "stage1"]),
        ("ladder", ["tune/random"], ["pypi-pairs"]),
        ("ladder", ["start/contriever-style"], ["pypi-pairs", "pretrain-corpus", "contriever-style"]),
        ("ladder", ["fight-102400/minilm-dot"], ["pypi-pairs", "pypi-pairs-more", "package-pairs", "stage1"]),
    ],
)
def test_each_start_of_the_sweeps_prepares_what_its_cells_read(config, only, steps, monkeypatch):
    """The pretraining corpus is named only in the Contriever-style step's YAML config, and stage 1's
    pairs only in stage 1's arguments: both are found, and SPLADE's sitting builds only its data."""
    from conftest import REPO

    from clipmag_experiments.design.expansion import expand
    from clipmag_experiments.design.prepare import steps_read_by
    from clipmag_experiments.design.selection import selected

    monkeypatch.chdir(REPO)  # a sweep runs from the checkout, its configs named relative to it
    cfg = sweep.load_sweep_config(f"configs/sweeps/{config}.yaml")
    cells = [c for c in expand(cfg) if selected(c, only)]
    assert [s.name for s in steps_read_by(cfg.prepare, sweep.cell_words(cells))] == steps
