"""The ladder sweep's draft names what its header says: five starts (a random one fixed for every
seed, a Contriever-style one pretrained by a prepare step), a step-0 row with each start's
diagnostics, and a 102,400-pair budget for the dot-pretrained starts that never repeats a pair."""

from __future__ import annotations

import importlib
from functools import cache
from pathlib import Path

import pytest

from clipmag.registry.config_packages import config_path
from clipmag.registry.evaluations import get_evaluation
from clipmag_experiments.sweep import run as sweep
from text_retrieval.cli import parse_args as parse_train_args

PYPI_TRAIN = "runs/data/pypi-pairs/train/shards"


@cache
def _config():
    return sweep.load_sweep_config(config_path("configs/sweeps/ladder.yaml"))


@cache
def _resolved() -> list:
    """Every cell with its resolved text-trainer config (parsed once for the tests below)."""
    return [(cell, parse_train_args(cell.argv)) for cell in sweep.expand(_config())]


@pytest.mark.slow  # resolves all 302 cells' trainer configs: most of a minute on 2 shared cores
def test_the_draft_loads_and_names_five_starts_with_a_fixed_random_one():
    cfg = _config()
    assert all(callable(importlib.import_module(step.module).main) for step in cfg.prepare)
    cells = sweep.expand(cfg)
    starts = {c.model for c in cells}
    assert starts == {"random", "minilm", "minilm-dot", "splade", "contriever-style"}
    for cell, run in _resolved():
        assert (run.model.init, run.model.init_seed) == (
            ("random", 0) if cell.model == "random" else ("pretrained", None)
        )
    assert {c.model for c in cells if c.group == "code-search-102400"} == {"minilm-dot", "splade", "contriever-style"}
    assert Path(config_path("configs/sweeps/ladder.yaml")).read_text().startswith("# DRAFT")


def test_the_contriever_style_start_is_the_export_of_its_pretraining_step():
    cfg = _config()
    step = next(s for s in cfg.prepare if s.name == "contriever-style")
    pretraining = parse_train_args(step.args)
    assert pretraining.data.pairs == "crops" and pretraining.head.name == "dot"
    export = f"{pretraining.train.output_dir}/export"
    assert step.creates == f"{export}/clipmag_head.json"
    assert all(
        c.argv[c.argv.index("--model") + 1] == export for c in sweep.expand(cfg) if c.model == "contriever-style"
    )


@pytest.mark.slow
def test_the_step_zero_row_diagnoses_every_start_and_no_budget_repeats_a_pair(tmp_path):
    cfg = _config()
    untuned = next(g for g in cfg.groups if g.name == "starts-untuned")
    evaluation = untuned.evaluations[0]
    get_evaluation(evaluation.kind).check(tmp_path / "export", tmp_path / "out", evaluation.args)
    args = next(s for s in cfg.prepare if s.name == "pypi-pairs").args
    floor = int(args[args.index("--min-train-pairs") + 1])
    for cell, run in _resolved():
        if run.data.train == PYPI_TRAIN:
            assert run.train.steps * run.data.batch_size <= floor
        if cell.group == "starts-untuned":
            assert run.train.steps == 0
