"""The ladder sweep's protocol names what its header says: five starts (a random one fixed for every
seed, a Contriever-style one pretrained by a prepare step), the powered fight's groups word for word
for the new starts, each start's diagnostics on the fight's own test sets, and a 102,400-pair budget
for two dot-pretrained starts, tuned at that budget, that never repeats a pair."""

from __future__ import annotations

import dataclasses
import importlib
from functools import cache

import pytest

from clipmag.registry.config_packages import config_path
from clipmag.registry.evaluations import get_evaluation
from clipmag_experiments.cells.evaluation_args import evaluation_argv
from clipmag_experiments.sweep import run as sweep
from text_retrieval.cli import parse_args as parse_train_args
from text_retrieval.evaluation.sweep_evaluation import parse_args as parse_rescoring_args
from text_retrieval.predict.start_diagnostics import parse_args as parse_diagnostics_args

FIGHT_GROUPS = ("start", "tune", "fight")  # the powered fight's groups, which the ladder's new starts repeat


@cache
def _config():
    return sweep.load_sweep_config(config_path("configs/sweeps/ladder.yaml"))


@cache
def _resolved() -> list:
    """Every cell with its resolved text-trainer config (parsed once for the tests below)."""
    return [(cell, parse_train_args(cell.argv)) for cell in sweep.expand(_config())]


def _group(cfg, name: str):
    return next(g for g in cfg.groups if g.name == name)


def _rules(group) -> tuple:
    """What a group does to every start it trains (its models aside)."""
    return (group.args, group.heads, group.seeds, group.variants, group.extend, group.evaluations, group.choose_variant)


def test_the_new_starts_run_the_powered_fights_groups_word_for_word():
    ladder, fight = _config(), sweep.load_sweep_config(config_path("configs/sweeps/powered_fight.yaml"))
    assert ladder.args == fight.args
    assert ladder.comparison == dataclasses.replace(fight.comparison, groups=["fight", "fight-102400"])
    for name in FIGHT_GROUPS:
        ours, theirs = _group(ladder, name), _group(fight, name)
        assert _rules(ours) == _rules(theirs), name
    budget = _group(ladder, "tune-102400")
    assert (budget.variants, budget.extend, budget.seeds) == (
        _group(fight, "tune").variants,
        _group(fight, "tune").extend,
        [0, 1],
    )  # tuned again at the larger budget, from the same grid, with two seeds


def test_the_contriever_style_start_is_the_export_of_its_pretraining_step_inside_the_sweep():
    cfg = _config()
    assert all(callable(importlib.import_module(step.module).main) for step in cfg.prepare)
    step = next(s for s in cfg.prepare if s.name == "contriever-style")
    pretraining = parse_train_args(step.args)
    assert pretraining.data.pairs == "crops" and pretraining.head.name == "dot"
    export = f"{pretraining.train.output_dir}/export"
    assert export.startswith(f"{cfg.output_dir}/") and step.creates == f"{export}/clipmag_head.json"  # archived
    assert all(
        c.argv[c.argv.index("--model") + 1] == export for c in sweep.expand(cfg) if c.model == "contriever-style"
    )


def test_the_diagnostics_read_the_fights_test_sets_with_its_bundled_trees(tmp_path):
    cfg = _config()
    (evaluation,) = _group(cfg, "diagnostics").evaluations
    argv = [*evaluation.args, "--model", str(tmp_path / "export"), "--output", str(tmp_path / "out")]
    get_evaluation(evaluation.kind).check(tmp_path / "export", tmp_path / "out", evaluation.args)
    settings = parse_diagnostics_args(argv)
    bundled = {a.split("=", 1)[0].removeprefix("data."): a.split("=", 1)[1] for a in cfg.args if "bundled." in a}
    assert {f"bundled.{k}": str(v) for k, v in vars(settings.bundled).items() if f"bundled.{k}" in bundled} == bundled
    tested = next(a for a in _group(cfg, "start").args if a.startswith("data.test="))
    assert settings.data == [s.strip() for s in tested.removeprefix("data.test=").strip("[]").split(",")]


@pytest.mark.slow  # resolves every cell's trainer config: most of a minute on 2 shared cores
def test_five_starts_a_fixed_random_one_and_no_budget_repeats_a_pair():
    cfg = _config()
    cells = sweep.expand(cfg)
    assert {c.model for c in cells} == {"random", "minilm", "minilm-dot", "splade", "contriever-style"}
    assert {c.model for c in cells if c.group.endswith("102400")} == {"minilm-dot", "contriever-style"}
    floors = {}
    for step in cfg.prepare:
        if "--min-train-pairs" in step.args:
            floors[f"{step.args[0]}/train/shards"] = int(step.args[step.args.index("--min-train-pairs") + 1])
    for cell, run in _resolved():
        assert (run.model.init, run.model.init_seed) == (
            ("random", 0) if cell.model == "random" else ("pretrained", None)
        )
        if cell.group in ("start", "diagnostics"):
            assert run.train.steps == 0
        else:
            assert run.train.steps * run.data.batch_size <= floors[run.data.train], cell.directory
            assert run.train.steps == (1600 if cell.group.endswith("102400") else 400)


def test_every_minilm_start_trains_tests_and_is_diagnosed_in_fp32_and_splade_as_the_cpu_has_it():
    """The amendment: the MiniLM-architecture starts pinned to fp32 (their cells, the two pretraining
    steps and the diagnostics of their norms), SPLADE's diagnostics at ``auto`` like its fight rows."""
    precisions = {}
    for cell, args in _resolved():
        precisions.setdefault(cell.model, set()).add(args.train.precision)
        for evaluation in cell.evaluations:  # the diagnostics, and the tuning cells' dev re-scoring
            parse = {"start-diagnostics": parse_diagnostics_args, "retrieval": parse_rescoring_args}[evaluation.kind]
            settings = parse([*evaluation_argv(cell, evaluation), "--model", "export", "--output", "out"])
            assert settings.precision == ("auto" if cell.model == "splade" else "fp32")
    assert precisions == {"splade": {"auto"}, **{start: {"fp32"} for start in precisions if start != "splade"}}
    for step in ("stage1", "contriever-style"):
        (prepared,) = [s for s in _config().prepare if s.name == step]
        assert parse_train_args(prepared.args).train.precision == "fp32"
