"""The powered fight keeps the rules its header commits to: every start and head tuned at the budget
it is compared at with two seeds on dev, the compared seeds 0 and 1 the tuning runs themselves, a
step-0 row per start and head, the same test sets for every cell, and an equivalence margin."""

from __future__ import annotations

from functools import cache

from clipmag.registry.config_packages import config_path
from clipmag_experiments.cells.evaluation_args import evaluation_argv
from clipmag_experiments.sweep import run as sweep
from clipmag_experiments.sweep.plan import cpu_plan, shares_a_run
from text_retrieval.cli import parse_args as parse_train_args
from text_retrieval.evaluation.sweep_evaluation import parse_args as parse_rescoring_args

STARTS = ["splade", "minilm-dot", "minilm"]
HEADS = ["cosine", "dot", "qnorm", "dnorm"]


def _config():
    return sweep.load_sweep_config(config_path("configs/sweeps/powered_fight.yaml"))


@cache
def _resolved() -> list:
    return [(cell, parse_train_args(cell.argv)) for cell in sweep.expand(_config())]


def test_the_protocol_compares_one_group_with_a_margin_and_a_start_row():
    cfg = _config()
    assert cfg.comparison.groups == ["fight"] and cfg.comparison.holm == "table"
    assert cfg.comparison.margin == 0.01 and cfg.comparison.start_group == "start"
    assert cfg.restore_from == "results/powered_fight"
    groups = {g.name: g for g in cfg.groups}
    assert groups["fight"].choose_variant.group == "tune" and groups["fight"].choose_variant.dataset == "validation"
    assert groups["tune"].extend.dataset == "validation"  # the edge test reads dev, as the choice does
    for name in groups:
        assert groups[name].heads == HEADS


def test_every_start_and_head_is_tuned_at_the_compared_budget_with_two_seeds():
    cells = [(c, a) for c, a in _resolved()]
    for group, seeds in (("tune", {0, 1}), ("fight", {0, 1, 2}), ("start", {0})):
        mine = [(c, a) for c, a in cells if c.group == group]
        for start in STARTS:
            for head in HEADS:
                assert {c.seed for c, _ in mine if c.model == start and c.head == head} == seeds
    steps = {c.group: {a.train.steps for cc, a in cells if cc.group == c.group} for c, _ in cells}
    assert steps == {"start": {0}, "tune": {400}, "fight": {400}}
    tested = {tuple(a.data.test) for _, a in cells}
    assert len(tested) == 1  # every cell, the start included, on the same test sets
    assert {a.data.batch_size for _, a in cells} == {64}
    rates = {a.optim.lr for c, a in cells if c.group == "tune"}
    assert rates == {2e-6, 6e-6, 2e-5, 6e-5, 2e-4, 6e-4, 2e-3}  # the grid and its extensions


def test_compared_seeds_0_and_1_are_the_tuning_runs_and_the_plan_prices_only_seed_2():
    cells = sweep.expand(_config())
    fight = [c for c in cells if c.group == "fight"]
    assert {c.seed for c in fight if shares_a_run(c, cells)} == {0, 1}
    assert not any(shares_a_run(c, cells) for c in fight if c.seed == 2)
    plan = cpu_plan(_config())
    rates = plan.rates
    seed_two = sum(400 * 64 / rates[start] / 3600 for start in STARTS for _ in HEADS)
    assert abs(plan.hours["fight"] - seed_two) < 1e-9


def test_the_minilm_starts_train_test_and_rescore_dev_in_fp32_and_splade_as_the_cpu_has_it():
    """The amendment: a start's cells share one precision; the MiniLM starts (and the stage-1 run
    that builds minilm-dot, whose weights are fingerprinted) are pinned to fp32, SPLADE stays
    ``auto``, and each tuning cell's dev re-scoring encodes in its cell's precision."""
    precisions = {}
    for cell, args in _resolved():
        precisions.setdefault(cell.model, set()).add(args.train.precision)
        for evaluation in cell.evaluations:
            wanted = [] if cell.model == "splade" else ["precision=fp32"]
            argv = evaluation_argv(cell, evaluation)
            assert argv == [*evaluation.argv(), *wanted]
            settings = parse_rescoring_args([*argv, "--model", "export", "--output", "out"])
            assert settings.precision == ("auto" if cell.model == "splade" else "fp32")
    assert precisions == {"splade": {"auto"}, "minilm-dot": {"fp32"}, "minilm": {"fp32"}}
    (stage1,) = [step for step in _config().prepare if step.name == "stage1"]
    assert parse_train_args(stage1.args).train.precision == "fp32"
    assert stage1.fingerprint == ["runs/positive_regime/stage1/export/model.safetensors"]


def test_the_headers_data_sentence_is_the_pin_file_and_the_builders_defaults():
    """The protocol's counts are what the builder draws and the pins split, not typed beside them."""
    import json
    from importlib.resources import files

    from text_retrieval.data.bundled.pypi_pairs import PypiPairsCommand

    header = config_path("configs/sweeps/powered_fight.yaml").read_text(encoding="utf-8")
    pins_file = files("text_retrieval.data.bundled").joinpath("pypi_pins.json")
    pins = json.loads(pins_file.read_text(encoding="utf-8"))["packages"]
    splits = {split: sum(1 for p in pins if p["split"] == split) for split in ("train", "dev", "test")}
    command = PypiPairsCommand()
    assert command.n_dev == command.n_test == 1000 and command.corpus_size == 5000
    assert f"train (the fair fight's {splits['train']} packages)" in header
    assert f"dev ({splits['dev']} packages: 1,000 queries over 5,000" in header
    assert f"test ({splits['test']} packages: 1,000 queries over 5,000" in header
