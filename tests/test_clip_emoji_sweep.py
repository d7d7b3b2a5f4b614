"""The emoji sweep's protocol as its header documents it, before any run: the towers chosen first on
validation zero-shot, every temperature (and SigLIP's learning rate) chosen on the validation split at
that tower - each choice and each grid extension reads the validation scores the candidates kept,
never a test number - the 80 compared cells (4 losses x 4 heads x 5 seeds) testing on the test split
at the chosen settings, every run validating as it trains, and the comparison naming those groups."""

from __future__ import annotations

from clipmag.registry.config_packages import config_path
from clipmag.results.record import build_results, write_results
from clipmag.scoring.head_record import HeadRecord
from clipmag_experiments.cells.choice import choose_variant
from clipmag_experiments.sweep import run as sweep
from image_text.cli import parse_args

COMPARED = {"infonce-sym": "infonce-scale", "infonce-i2t": "infonce-scale", "siglip": "siglip-scale"}
COMPARED["lit"] = "infonce-scale"
TOWER_CHOICE = ("towers", "zeroshot_mean_per_class_recall_head", "cosine")
LONGEST_WORDPIECE_TEXT = 50  # all-MiniLM-L6-v2's tokens of the longest emoji text, [CLS] and [SEP] included


def test_the_emoji_sweep_chooses_towers_then_scales_on_validation_and_compares_on_test():
    path = config_path("configs/sweeps/clip_emoji.yaml")
    cfg = sweep.load_sweep_config(path)
    build, floors = cfg.prepare
    assert build.module == "image_text.data.shards_cli" and "--emoji" in build.args
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
    assert towers == {f"clipmag-emoji-{t}" for t in ("t", "s", "sm", "r", "rm")}  # sm: amendment 1; r, rm: 2
    for cell in cells:
        run = parse_args(cell.argv)
        assert run.model.query_side == "image" and run.train.precision == "fp32", cell.label
        assert run.data.train == "data/emoji/train" and not run.data.augment
        assert (run.data.validation, run.data.test) == (["data/emoji/val"], ["data/emoji/test"]), cell.label
        assert run.train.eval_every == 100, cell.label  # the checkpoint is each run's best on validation
    lit = next(c for c in cells if c.group == "lit")
    tower = next(c for c in cells if c.group == "lit-image-tower")
    assert parse_args(lit.argv).model.image_init == f"{tower.directory}/export"
    scales = [c.variant for c in cells if c.group == "infonce-scale" and c.head == "cosine" and not c.extends]
    assert scales == ["scale5", "scale14", "scale40"]  # brackets CLIP's 1/0.07


def test_every_tower_reads_each_training_text_whole():
    """The context holds the longest training text (50 tokens with its start and end tokens, in CLIP's
    BPE and in MiniLM's WordPiece alike)."""
    from image_text.model.architecture import build_open_clip
    from image_text.model.config import ClipModelConfig

    for name in ("clipmag-emoji-t", "clipmag-emoji-s", "clipmag-emoji-r"):
        assert build_open_clip(ClipModelConfig(name=name))[0].context_length >= 50
    for name in ("clipmag-emoji-sm", "clipmag-emoji-rm"):
        assert build_open_clip(ClipModelConfig(name=name))[3].context_length >= LONGEST_WORDPIECE_TEXT


def _validated(cell, **validation: float) -> None:
    """A finished run of ``cell`` whose last validation gave ``validation`` (what a choice reads)."""
    record = build_results({"front_end": "clip"}, HeadRecord({"name": cell.head}), {}, {}, validation, {})
    write_results(record, cell.directory)


def test_the_tower_and_steps_chosen_on_validation_reach_every_compared_cell(tmp_path):
    """The choice chain as the sweep resolves it: towers -> scales (and SigLIP's rate) -> compared
    cells; each compared cell trains the tower and steps cosine chose, at its own head's scale."""
    cfg = sweep.load_sweep_config(config_path("configs/sweeps/clip_emoji.yaml"))
    cfg.output_dir = str(tmp_path / "runs")
    cells = sweep.expand(cfg)
    recall = {"t500": 0.10, "t1000": 0.12, "s500": 0.20, "s1000": 0.15, "sm500": 0.18, "sm1000": 0.19}
    recall |= {"r500": 0.17, "r1000": 0.16, "rm500": 0.19}
    for cell in (c for c in cells if c.group == "towers"):
        _validated(cell, zeroshot_mean_per_class_recall_head=recall[cell.variant])
    for cell in (c for c in cells if c.group in ("infonce-scale", "siglip-lr", "siglip-scale") and not c.extends):
        assert parse_args(choose_variant(cell, cells).argv).model.name == "clipmag-emoji-s"
        inside = cell.variant in ("scale14", "lr1e-3", "scale10")  # every best inside its grid: no extension
        _validated(cell, mean_r1_head=0.3 if inside else 0.1)
    for cell in (c for c in cells if c.group in COMPARED or c.group == "lit-image-tower"):
        run = parse_args(choose_variant(cell, cells).argv)
        assert (run.model.name, run.train.steps, run.train.seed) == ("clipmag-emoji-s", 500, cell.seed), cell.label
        assert run.loss.scale == (10.0 if cell.group == "siglip" else 14.2857), cell.label
        assert run.optim.lr == 1e-3 or cell.group != "siglip", cell.label


def test_a_chosen_minilm_tower_reaches_every_compared_cell_locked(tmp_path):
    """Amendment 1's tower carries its lock and dropout setting with it: a compared cell trains the
    sentence encoder frozen, as the tower chosen on validation did (LiT's image lock comes on top)."""
    cfg = sweep.load_sweep_config(config_path("configs/sweeps/clip_emoji.yaml"))
    cfg.output_dir = str(tmp_path / "runs")
    cells = sweep.expand(cfg)
    for cell in (c for c in cells if c.group == "towers"):
        _validated(cell, zeroshot_mean_per_class_recall_head=0.4 if cell.variant == "sm1000" else 0.1)
    for cell in (c for c in cells if c.group in ("infonce-scale", "siglip-lr", "siglip-scale") and not c.extends):
        _validated(cell, mean_r1_head=0.3 if cell.variant in ("scale14", "lr1e-3", "scale10") else 0.1)
    for cell in (c for c in cells if c.group in COMPARED or c.group == "lit-image-tower"):
        run = parse_args(choose_variant(cell, cells).argv)
        assert (run.model.name, run.train.steps) == ("clipmag-emoji-sm", 1000), cell.label
        assert run.model.lock_text and run.model.dropout == 0, cell.label
        assert run.model.lock_image == run.model.lock_image_freeze_bn_stats == (cell.group == "lit"), cell.label
