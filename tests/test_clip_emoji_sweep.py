"""The emoji sweep's protocol as its header documents it, before any run: the towers chosen first on
validation zero-shot, every temperature (and SigLIP's learning rate) chosen on the validation split at
that tower - each choice and each grid extension reads the validation scores the candidates kept,
never a test number - the 80 compared cells (4 losses x 4 heads x 5 seeds) testing on the test split
at the chosen settings, every run validating as it trains, and the comparison naming those groups."""

from __future__ import annotations

from clipmag.registry.config_packages import config_path
from clipmag_experiments.sweep import run as sweep
from image_text.cli import parse_args

COMPARED = {"infonce-sym": "infonce-scale", "infonce-i2t": "infonce-scale", "siglip": "siglip-scale"}
COMPARED["lit"] = "infonce-scale"
TOWER_CHOICE = ("towers", "zeroshot_mean_per_class_recall_head", "cosine")


def test_the_emoji_sweep_chooses_towers_then_scales_on_validation_and_compares_on_test():
    path = config_path("configs/sweeps/clip_emoji.yaml")
    cfg = sweep.load_sweep_config(path)
    build, floors = cfg.prepare
    assert build.module == "image_text.shards_cli" and "--emoji" in build.args
    assert floors.args == ["data/emoji/baselines.json", "runs/clip_emoji"]  # the tables' floors, kept with the runs
    cells = sweep.expand(cfg)
    sweep.check_cells(cells, str(path))  # every cell parses with the CLIP trainer's own config
    assert cfg.comparison.groups == list(COMPARED)
    order = [g.name for g in cfg.groups]
    by_group = {g.name: g for g in cfg.groups}
    assert order[0] == "towers" and all(order.index(g) > order.index(COMPARED[g]) for g in COMPARED)
    for name, selection in COMPARED.items():
        choice = by_group[name].choose_variant
        assert (choice.group, choice.metric) == (selection, "mean_r1_head")
    for name in ("infonce-scale", "siglip-lr", "lit-image-tower"):
        choice = by_group[name].choose_variant
        assert (choice.group, choice.metric, choice.head) == TOWER_CHOICE, name
    for group in cfg.groups:
        for reads in (group.choose_variant, group.extend):
            assert reads is None or reads.dataset == "validation", group.name
    final = [c for c in cells if c.group in COMPARED]
    assert len(final) == 4 * 4 * 5 and {c.seed for c in final} == {0, 1, 2, 3, 4}
    towers = {parse_args(c.argv).model.name for c in cells if c.group == "towers"}
    assert towers == {"clipmag-emoji-t", "clipmag-emoji-s"}
    for cell in cells:
        run = parse_args(cell.argv)
        assert run.model.query_side == "image" and run.train.precision == "fp32", cell.label
        assert run.data.train == "data/emoji/train" and not run.data.augment
        assert (run.data.validation, run.data.test) == ("data/emoji/val", "data/emoji/test"), cell.label
        assert run.train.eval_every == 100, cell.label  # the checkpoint is each run's best on validation
    lit = next(c for c in cells if c.group == "lit")
    tower = next(c for c in cells if c.group == "lit-image-tower")
    assert parse_args(lit.argv).model.image_init == f"{tower.directory}/export"
    scales = [c.variant for c in cells if c.group == "infonce-scale" and c.head == "cosine" and not c.extends]
    assert scales == ["scale5", "scale14", "scale40"]  # brackets CLIP's 1/0.07


def test_every_tower_reads_each_training_text_whole():
    """The context holds the longest training text (50 tokens with its start and end tokens)."""
    from image_text.architecture import build_open_clip
    from image_text.model_config import ClipModelConfig

    for name in ("clipmag-emoji-t", "clipmag-emoji-s"):
        assert build_open_clip(ClipModelConfig(name=name))[0].context_length >= 50
