"""sweep.json: the protocol is written before the first cell, and every later start is appended."""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

import pytest
import toy_frontend

from clipmag.config.build import to_dict
from clipmag.errors import ConfigError
from clipmag.registry.front_ends import FRONT_ENDS, FrontEnd
from clipmag.results.provenance import config_sha256
from clipmag_experiments.design.comparison import ComparisonProtocol
from clipmag_experiments.design.grid import VariantChoice
from clipmag_experiments.design.protocol import read_protocol
from clipmag_experiments.sweep import run as sweep


@pytest.fixture
def cfg(monkeypatch, tmp_path):
    monkeypatch.setitem(FRONT_ENDS, "toy", FrontEnd("toy", "toy_frontend"))
    toy_frontend.CALLS.clear()
    group = sweep.SweepGroup(name="toy", kind="toy", heads=["cosine", "qnorm"], seeds=[0])
    return sweep.SweepConfig(output_dir=str(tmp_path / "runs"), groups=[group])


def test_the_protocol_precedes_the_results_and_names_code_and_config(cfg, tmp_path):
    sweep.run_sweep(cfg)
    (start,) = read_protocol(cfg.output_dir)
    assert start["config_sha256"] == config_sha256(to_dict(cfg)) and start["config"]["groups"][0]["name"] == "toy"
    assert set(start["code"]) == {"commit", "dirty", "diff_sha256", "reason"} and start["command"]["argv"]
    cell = json.loads((tmp_path / "runs" / "toy" / "default" / "qnorm" / "seed0" / "cell.json").read_text())
    assert cell["sweep_config_sha256"] == start["config_sha256"]
    results = json.loads((tmp_path / "runs" / "toy" / "default" / "qnorm" / "seed0" / "results.json").read_text())
    assert start["started"] <= results["created"]


def test_a_resumed_sweep_appends_and_says_what_changed(cfg, caplog):
    sweep.run_sweep(cfg)
    cfg.groups[0].seeds = [0, 1]
    with caplog.at_level(logging.WARNING, logger="clipmag"):
        sweep.run_sweep(cfg)
    first, second = read_protocol(cfg.output_dir)
    assert first["config_sha256"] != second["config_sha256"] and first["config"]["groups"][0]["seeds"] == [0]
    assert "since this sweep first started, the sweep config changed" in caplog.text


def test_the_archive_keeps_the_protocol_and_each_cells_small_files_only(cfg, tmp_path):
    from clipmag_experiments.sweep.archive import archive_results

    sweep.run_sweep(cfg)
    cell = tmp_path / "runs" / "toy" / "default" / "qnorm" / "seed0"
    (cell / "checkpoints").mkdir()
    (cell / "checkpoints" / "latest.pt").write_bytes(b"weights")
    pretrained = Path(cfg.output_dir) / "pretrain" / "start"  # a start a prepare step trained in the sweep's folder
    (pretrained / "export").mkdir(parents=True)
    for name, text in (("results.json", "{}"), ("config.yaml", "seed: 0"), ("export/model.safetensors", "weights")):
        (pretrained / name).write_text(text)
    copied = archive_results(cfg.output_dir, tmp_path / "kept")
    kept = sorted(str(p.relative_to(tmp_path / "kept")) for p in copied)
    assert kept == [
        "pretrain/start/config.yaml",
        "pretrain/start/results.json",
        "sweep.json",
        *(f"toy/default/{h}/seed0/{f}" for h in ("cosine", "qnorm") for f in ("cell.json", "results.json")),
    ]
    assert read_protocol(tmp_path / "kept") == read_protocol(cfg.output_dir)
    assert archive_results(cfg.output_dir, tmp_path / "kept") == []  # nothing new to copy


def _selection_and_dev_groups() -> list:
    grid = sweep.SweepGroup(
        name="grid",
        kind="toy",
        heads=["cosine", "qnorm"],
        variants=[sweep.SweepVariant("scale5", ["loss.scale=5.0"]), sweep.SweepVariant("scale20", ["loss.scale=20.0"])],
    )
    chosen = sweep.SweepGroup(
        name="dev-scale", kind="toy", heads=["cosine", "qnorm"], choose_variant=VariantChoice(group="grid")
    )
    return [grid, chosen]


def test_the_protocol_states_how_the_chosen_systems_are_compared_before_any_result(cfg):
    cfg.groups = _selection_and_dev_groups()
    cfg.comparison = ComparisonProtocol(groups=["dev-scale"])
    sweep.run_sweep(cfg)
    (start,) = read_protocol(cfg.output_dir)
    statement = start["comparison"]
    assert statement["baseline"] == "cosine" and list(statement["groups"]) == ["dev-scale"]
    assert "chosen on the selection group 'grid' by NDCG@10" in statement["groups"]["dev-scale"]
    assert "randomisation test over queries" in statement["test"] and "Holm" in statement["family"]
    assert "80% power" in statement["power"] and statement["alpha"] == 0.05


def test_a_comparison_of_a_group_with_several_settings_per_head_is_refused(cfg):
    cfg.groups = _selection_and_dev_groups()
    cfg.comparison = ComparisonProtocol(groups=["grid"])
    with pytest.raises(ConfigError, match="group 'grid' lists variants.*pick the best setting on the test set"):
        sweep.run_sweep(cfg)
    cfg.comparison = ComparisonProtocol(groups=["nothing"])
    with pytest.raises(ConfigError, match="comparison.groups: 'nothing' is not a group of the sweep"):
        sweep.run_sweep(cfg)
    assert not toy_frontend.CALLS  # refused before any cell ran


def test_a_sitting_on_some_cells_records_them_beside_an_unchanged_protocol(cfg, caplog):
    from clipmag_experiments.cli import SweepCommand

    sweep.run_sweep(cfg)
    sitting = SweepCommand(**{f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}, only=["toy"])
    with caplog.at_level(logging.WARNING, logger="clipmag"):
        sweep.run_sweep(sitting, sitting.only)
    first, second = read_protocol(cfg.output_dir)
    assert second["config_sha256"] == first["config_sha256"] and "only" not in second["config"]
    assert second["only"] == ["toy"] and "sweep config changed" not in caplog.text
