"""The emoji sweep's protocol as its header documents it, before any run: every temperature (and
SigLIP's learning rate) chosen on the validation split - each choice and each grid extension reads
the validation scores the candidates kept, never a test number, so the selection cells can be the
compared seed-0 cells themselves - the 48 compared cells testing on the test split at the chosen
settings, every run validating as it trains, and the comparison naming exactly those four groups."""

from __future__ import annotations

from clipmag.clip.cli import parse_args
from clipmag.registry.config_packages import config_path
from clipmag_experiments.sweep import run as sweep

COMPARED = {"infonce-sym": "infonce-sym-scale", "infonce-i2t": "infonce-i2t-scale", "siglip": "siglip-scale"}
COMPARED["lit"] = "infonce-sym-scale"


def test_the_emoji_sweep_chooses_on_validation_and_compares_on_test():
    path = config_path("configs/sweeps/clip_emoji.yaml")
    cfg = sweep.load_sweep_config(path)
    build, tower = cfg.prepare
    assert build.module == "clipmag.clip.shards_cli" and "--emoji" in build.args
    assert parse_args(tower.args).data.test == "data/emoji/test"
    cells = sweep.expand(cfg)
    sweep.check_cells(cells, str(path))  # every cell parses with the CLIP trainer's own config
    assert cfg.comparison.groups == list(COMPARED)
    by_group = {g.name: g for g in cfg.groups}
    for name, selection in COMPARED.items():
        assert (
            by_group[name].choose_variant.group == selection and by_group[name].choose_variant.metric == "mean_r1_head"
        )
    for group in cfg.groups:
        for reads in (group.choose_variant, group.extend):
            assert reads is None or reads.dataset == "validation", group.name
    assert by_group["siglip-scale"].choose_variant.head == "cosine"  # SigLIP's rate, chosen on cosine alone
    final = [c for c in cells if c.group in COMPARED]
    assert len(final) == 4 * 4 * 3 and {c.seed for c in final} == {0, 1, 2}
    for cell in cells:
        run = parse_args(cell.argv)
        assert run.model.name == "clipmag-tiny" and run.model.query_side == "image" and run.train.precision == "fp32"
        assert run.data.train == "data/emoji/train" and not run.data.augment
        assert (run.data.validation, run.data.test) == ("data/emoji/val", "data/emoji/test"), cell.label
        assert run.train.eval_every == 100, cell.label  # the checkpoint is each run's best on validation
        assert run.train.steps == (1000 if run.loss.kind == "siglip" else 500), cell.label
    scales = [c.variant for c in cells if c.group == "infonce-sym-scale" and c.head == "cosine" and not c.extends]
    assert scales == ["scale5", "scale14", "scale40"]  # brackets CLIP's 1/0.07
    grid = by_group["infonce-sym-scale"].extend
    assert [v.name for v in grid.low] == ["scale2"] and [v.name for v in grid.high] == ["scale100"]
