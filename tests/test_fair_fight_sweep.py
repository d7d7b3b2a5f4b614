"""The fair-fight sweep keeps the rules its header commits to: every head (cosine included) gets the
same selection grids on dev, every run decays to zero at its own end and is tested at its best dev
checkpoint, and no code-search budget repeats a pair of the PyPI set."""

from __future__ import annotations

import importlib
from collections import defaultdict
from functools import cache
from pathlib import Path

from clipmag.registry.config_packages import config_path
from clipmag_experiments.sweep import run as sweep
from text_retrieval.cli import parse_args as parse_train_args
from text_retrieval.data.bundled.pypi_pairs import PypiPairsCommand

COMPARED = ["code-search-2560", "code-search-25600", "code-search-25600-learned", "scifact-2560"]
PYPI_TRAIN = "runs/data/pypi-pairs/train/shards"
REPO = Path(__file__).resolve().parents[1]


def _config():
    return sweep.load_sweep_config(config_path("configs/sweeps/fair_fight.yaml"))


@cache
def _resolved() -> list:
    """Every cell with its resolved text-trainer config (parsed once for the tests below)."""
    return [(cell, parse_train_args(cell.argv)) for cell in sweep.expand(_config())]


def test_the_config_loads_and_expands_to_the_compared_groups():
    cfg = _config()
    assert len(sweep.expand(cfg)) == 162  # 2 starts x 3 heads x (3 + 4 rates, 4 + 4 scales, 4 x 3 seeds)
    assert cfg.comparison.groups == COMPARED and cfg.comparison.holm == "table"
    assert all(callable(importlib.import_module(step.module).main) for step in cfg.prepare)
    groups = {g.name: g for g in cfg.groups}
    for name in COMPARED:
        assert groups[name].seeds == [0, 1, 2] and groups[name].heads == ["cosine", "qnorm", "dnorm"]
        assert groups[name].choose_variant.group == "scale-grid" and groups[name].continue_from is None


def test_every_head_gets_the_same_selection_grid_with_its_extensions():
    cfg = _config()
    groups = {g.name: g for g in cfg.groups}
    assert groups["lr-grid"].choose_variant is None  # each head its own rate: cosine is not the referee
    assert groups["scale-grid"].choose_variant.group == "lr-grid" and groups["scale-grid"].choose_variant.head is None
    for name in ("lr-grid", "scale-grid"):
        assert groups[name].extend.low and groups[name].extend.high  # a choice on an edge runs on outward
        grids = defaultdict(set)
        for cell in sweep.expand(cfg):
            if cell.group == name:
                grids[cell.model].add((cell.head, cell.variant, cell.extends))
        for cells in grids.values():
            per_head = {h: {(v, e) for hh, v, e in cells if hh == h} for h in ("cosine", "qnorm", "dnorm")}
            assert per_head["cosine"] == per_head["qnorm"] == per_head["dnorm"]
        scales = [float(v.args[0].split("=")[1]) for v in groups[name].variants] if name == "scale-grid" else None
        if scales:
            assert scales == sorted(scales) and scales[0] <= 5 and scales[-1] >= 50


def test_runs_decay_at_their_own_end_choose_checkpoints_on_dev_and_never_repeat_a_pair():
    cfg = _config()
    step = next(s for s in cfg.prepare if s.name == "pypi-pairs")
    args = step.args
    floor = int(args[args.index("--min-train-pairs") + 1])  # the builder refuses a smaller set
    assert "min_train_pairs" in PypiPairsCommand.__dataclass_fields__
    largest = 0
    for cell, run in _resolved():
        assert run.optim.schedule == "linear" and run.data.batch_size == 64
        pairs = run.train.steps * run.data.batch_size
        if run.data.train == PYPI_TRAIN:
            assert pairs <= floor, f"{cell.label}: {pairs} pairs from a set of at least {floor}"
            largest = max(largest, pairs)
        if cell.group in COMPARED:
            assert run.train.eval_every > 0 and run.train.keep_best and len(run.data.validation) == 1
            assert run.data.validation_split == "dev" and run.data.validation[0] not in run.data.test
            assert run.train.steps % run.train.eval_every == 0
        else:  # the selection grids read the dev set and nothing else
            assert run.data.test == ["runs/data/pypi-pairs/pypi-dev"] and run.data.test_split == "dev"
    assert largest >= 25_000


def test_the_documented_plan_is_the_plans_arithmetic():
    """docs/experiments.md's table for this sweep: pairs per group (steps x batch of every cell, grid
    extensions included) and CPU-hours at the sweep's stated throughputs, as `clipmag-sweep plan` sums them."""
    cfg = _config()
    rates = cfg.plan.cpu_pairs_per_second
    pairs, hours = defaultdict(int), defaultdict(float)
    for cell, run in _resolved():
        pairs[cell.group] += run.train.steps * run.data.batch_size
        hours[cell.group] += run.train.steps * run.data.batch_size / rates[cell.model] / 3600
    text = (REPO / "docs" / "experiments.md").read_text(encoding="utf-8")
    section = text[text.index("## The fair fight") :]
    section = section[section.index("plan --config configs/sweeps/fair_fight.yaml") :]
    for group in pairs:
        assert f"| {group} | {pairs[group]:,} | {hours[group]:.2f} |" in section
    assert f"| total | {sum(pairs.values()):,} | {sum(hours.values()):.2f} |" in section
