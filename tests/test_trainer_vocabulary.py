"""Both trainers spell one setting one way. Every key of either trainer is one both have, or is listed
here as the trainer's own with the reason the other has no such setting: a setting added to one
trainer under a name of its own fails here until it is spelled as the other trainer spells it (or is
declared its own). A key both trainers have is set by the same flag in both and takes values of one
type in both, or ``VALUES_DIFFER`` says why its values are each trainer's own. The old spellings of
either trainer (``clipmag.config.spellings.TRAINER_KEYS`` / ``TRAINER_FLAGS``) still work with one
warning each: on the command line, in config files, in stored configs and in sweep protocols."""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO

from clipmag.config.build import build_config, config_from_dict, key_type, load_yaml, to_dict
from clipmag.config.checks import config_fields, list_types
from clipmag.config.spellings import TRAINER_FLAGS, TRAINER_KEYS, current_spelling
from image_text import cli as clip_cli
from image_text.config import SHORTHANDS as CLIP_FLAGS
from image_text.config import ClipConfig
from text_retrieval import cli as text_cli
from text_retrieval.config import TEXT_SHORTHANDS as TEXT_FLAGS
from text_retrieval.config import TextConfig

TEXT_OWN = {
    "data.bundled.corpus_size": "the bundled code-search set has a corpus; the digits set pairs images and captions",
    "data.bundled.root": "the bundled text set is written to a folder; the digits set is drawn in memory",
    "data.bundled.python": "the bundled code-search sets are read from the interpreter's standard library",
    "data.bundled.scikit_learn": "the bundled out-of-domain set is read from the installed scikit-learn",
    "data.hard_negatives": "mined hard negatives travel with text pairs; image-text shards hold none",
    "data.pairs": (
        "the text trainer also makes unsupervised pairs from documents alone (two crops of one, "
        "Contriever's); the image-text trainer trains on the image-caption pairs it is given"
    ),
    "data.crop_ratio": "the share of a document's words each crop takes, under data.pairs=crops",
    "data.sts_range": "the STS objective's gold scale",
    "data.sts_scale": "the STS objective's score scale",
    "data.validation_split": "a text evaluation set (BEIR) holds several splits; a shard folder is one split",
    "data.test_split": "a text evaluation set (BEIR) holds several splits; a shard folder is one split",
    "model.init_seed": (
        "a random start fixed apart from the training seed, for the text experiments' from-scratch "
        "starts; the image-text trainer's random towers are drawn from train.seed"
    ),
    "model.pooling": "a text encoder's pooling; open_clip's towers pool by their architecture",
    "model.query_prefix": "text prompts of E5-style encoders",
    "model.document_prefix": "text prompts of E5-style encoders",
    "model.query_max_length": "queries and documents, both texts, truncated apart; captions: open_clip's context",
    "model.document_max_length": "queries and documents, both texts, truncated apart; captions: open_clip's context",
}
CLIP_OWN = {
    "data.augment": "image augmentation",
    "data.classnames": "zero-shot classification of images",
    "data.templates": "zero-shot classification of images",
    "data.bundled.seed": "the digits set is drawn with a seed; the text set is built from fixed sources",
    "data.bundled.per_class": "digits drawn per class",
    "model.query_side": "which tower is the query; in text retrieval the query is the query",
    "model.image_init": "one tower's weights from elsewhere",
    "model.text_init": "one tower's weights from elsewhere",
    "model.lock_image": "a frozen tower (LiT)",
    "model.lock_image_unlocked_groups": "a frozen tower (LiT)",
    "model.lock_image_freeze_bn_stats": "a frozen tower (LiT)",
    "model.lock_text": "a frozen tower (LiT)",
    "model.lock_text_unlocked_layers": "a frozen tower (LiT)",
    "model.lock_text_freeze_layer_norm": "a frozen tower (LiT)",
}
# Keys both trainers have whose values are each front end's own, with why: every other shared key
# takes values of one type in both (a key added to both with two types fails here).
VALUES_DIFFER = {
    "objective": (
        "the task the model is trained for, one meaning in both: text ranks documents (retrieval) or "
        "regresses STS scores (sts); image-text ranks texts for an image (i2t), images for a text (t2i) "
        "or both (sym), which also fixes model.query_side; in both loss.direction=auto is derived from "
        "it and the loss family is loss.kind (infonce or siglip)"
    ),
    "model.init": (
        "random means fresh weights in both; the other starts are the text encoder's own weights "
        "(pretrained) and, for an open_clip architecture, which has none, a tag or checkpoint"
    ),
}
TRAINERS = {
    "text": (TextConfig, TEXT_FLAGS, text_cli.parse_args),
    "clip": (ClipConfig, CLIP_FLAGS, clip_cli.parse_args),
}
RENAMES_AT = "clipmag.config.spellings.TRAINER_KEYS"
# A value for each renamed key in each trainer (the objectives differ: each trainer's own).
VALUES = {
    "model.name": "clipmag-micro",
    "objective": {"text": "sts", "clip": "i2t"},
    "data.train": "d/train",
    "data.validation": "d/val",
    "data.test": "d/test",
    "data.workers": "2",
    "data.skip_corrupt": "true",
    "data.bundled.train": "64",
    "data.bundled.validation": "8",
    "data.bundled.seed": "3",
    "model.init": "random",
    "data.bundled.test": "16",
}


def keys(cls: type, prefix: str = "") -> set[str]:
    """Every dotted key (a leaf, not a section) of the config class ``cls``."""
    found: set[str] = set()
    for name, tp in config_fields(cls).items():
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            found |= keys(tp, f"{prefix}{name}.")
        else:
            found.add(prefix + name)
    return found


def _deprecations(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "deprecated" in r.getMessage()]


def test_every_key_is_one_both_trainers_have_or_one_trainers_own():
    text, clip = keys(TextConfig), keys(ClipConfig)
    only_text, only_clip = text - clip, clip - text
    assert only_text == set(TEXT_OWN), (
        "a key only the text trainer has: if the image-text trainer has the setting, spell it alike "
        f"(the old spelling into {RENAMES_AT}), else add it to TEXT_OWN: {only_text ^ set(TEXT_OWN)}"
    )
    assert only_clip == set(CLIP_OWN), (
        "a key only the image-text trainer has: if the text trainer has the setting, spell it alike "
        f"(the old spelling into {RENAMES_AT}), else add it to CLIP_OWN: {only_clip ^ set(CLIP_OWN)}"
    )


def test_a_key_both_trainers_have_takes_one_type_in_both_or_says_why_not():
    shared = keys(TextConfig) & keys(ClipConfig)
    differ = {key for key in shared if key_type(TextConfig, key) != key_type(ClipConfig, key)}
    assert differ == set(VALUES_DIFFER), (
        "a key both trainers have takes values of another type in each: give it one type, or say why "
        f"in VALUES_DIFFER: {differ ^ set(VALUES_DIFFER)}"
    )


def test_the_bundled_set_and_a_random_start_are_spelled_alike_in_both_trainers():
    """``data.train=bundled`` trains on the trainer's bundled set and ``model.init=random`` starts
    from fresh weights, in both; their sizes are ``data.bundled.train`` / ``validation`` / ``test``."""
    for name, (cls, _, parse) in TRAINERS.items():
        cfg = parse(["data.train=bundled", "model.init=random", "data.bundled.validation=8"])
        assert (cfg.data.train, cfg.model.init, cfg.data.bundled.validation) == ("bundled", "random", 8), name
        assert to_dict(cls())["data"]["train"] == "bundled", name


def test_no_old_spelling_is_a_live_key_and_both_trainers_read_every_one():
    live = keys(TextConfig) | keys(ClipConfig)
    for old, new in TRAINER_KEYS.items():
        assert old not in live and new in live, old
        assert TextConfig.RENAMED_KEYS[old] == ClipConfig.RENAMED_KEYS[old] == new
    assert TextConfig.RENAMED_FLAGS == ClipConfig.RENAMED_FLAGS == TRAINER_FLAGS
    assert not set(TRAINER_FLAGS) & (set(TEXT_FLAGS) | set(CLIP_FLAGS))


def test_a_flag_sets_a_key_of_its_trainer_and_a_shared_key_has_one_flag_in_both():
    shared = keys(TextConfig) & keys(ClipConfig)
    for name, (cls, flags, _) in TRAINERS.items():
        for flag, target in flags.items():
            assert target.partition("=")[0] in keys(cls), (name, flag)
    by_key: dict[str, set[tuple[str, str, str]]] = {}
    for name, (_, flags, _) in TRAINERS.items():
        for flag, target in flags.items():
            by_key.setdefault(target.partition("=")[0], set()).add((name, flag, target))
    for key, given in by_key.items():
        if key in shared:
            assert {(flag, target) for _, flag, target in given if _ == "text"} == {
                (flag, target) for _, flag, target in given if _ == "clip"
            }, f"{key}: a key both trainers have takes the same flag in both ({sorted(given)})"


CASES = [
    (name, old, new) for name, (cls, _, _) in TRAINERS.items() for old, new in TRAINER_KEYS.items() if new in keys(cls)
]


def _value(name: str, key: str) -> str:
    value = VALUES[key]
    return value[name] if isinstance(value, dict) else value


@pytest.mark.parametrize(("name", "old", "new"), CASES)
def test_an_old_key_of_either_trainer_is_the_new_key_with_one_warning(name, old, new, tmp_path, caplog):
    cls = TRAINERS[name][0]
    value = _value(name, new)
    expected = to_dict(build_config(cls, None, [f"{new}={value}"]))
    with caplog.at_level(logging.WARNING, logger="clipmag"):
        assert to_dict(build_config(cls, None, [f"{old}={value}"])) == expected
    (line,) = _deprecations(caplog)
    assert line.startswith(f"command line: key '{old}' is deprecated, it is now '{new}'")
    caplog.clear()
    *parents, leaf = old.split(".")
    tree: dict[str, Any] = {leaf: [value] if list_types(key_type(cls, new)) else yaml.safe_load(value)}
    for part in reversed(parents):
        tree = {part: tree}
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump(tree), encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="clipmag"):
        assert to_dict(build_config(cls, path)) == expected
        assert to_dict(config_from_dict(cls, tree, "latest.pt")) == expected
    assert [line.split(": ", 1)[0] for line in _deprecations(caplog)] == [str(path), "latest.pt"]


@pytest.mark.parametrize("name", sorted(TRAINERS))
def test_the_old_data_flags_set_the_data_keys_in_both_trainers_with_one_warning_each(name, caplog):
    parse = TRAINERS[name][2]
    splits = [("train_shards", "d/train"), ("val_shards", "d/val"), ("test_shards", "d/test")]
    new = parse([word for old, value in splits for word in (f"--{TRAINER_FLAGS[old]}", value)])
    with caplog.at_level(logging.WARNING, logger="clipmag"):
        given_old = parse([word for old, value in splits for word in (f"--{old.replace('_', '-')}", value)])
    lines = _deprecations(caplog)
    assert len(lines) == 3 and all(
        f"--{old.replace('_', '-')} is deprecated" in line for (old, _), line in zip(splits, lines)
    )
    assert to_dict(given_old) == to_dict(new) and new.data.train == "d/train"


def test_both_trainers_take_the_siglip_and_fast_dropout_switches():
    for name, (_, _, parse) in TRAINERS.items():
        cfg = parse(["--siglip", "--no-fast-dropout"])
        assert (cfg.loss.kind, cfg.train.fast_dropout) == ("siglip", False), name


def _front_end(config_file: Path) -> str:
    results = json.loads((config_file.parent / "results.json").read_text(encoding="utf-8"))
    return results["run"]["front_end"]


def test_every_stored_run_config_rebuilds_in_todays_spelling(caplog):
    """The configs stored with the measured results (``results/**/config.yaml``, many written in the
    old spellings) rebuild, each old key read as its new one; the rebuilt config, saved again, reads
    back the same without a warning."""
    stored = sorted((REPO / "results").rglob("config.yaml"))
    assert len(stored) > 100
    old_spelled = 0
    for path in stored:
        cls = TRAINERS[_front_end(path)][0]
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="clipmag"):
            rebuilt = to_dict(config_from_dict(cls, load_yaml(path), str(path)))
        old_spelled += bool(_deprecations(caplog))
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="clipmag"):
            assert to_dict(config_from_dict(cls, rebuilt)) == rebuilt
            assert _deprecations(caplog) == [], path
    assert old_spelled > 0


def test_the_shipped_trainer_configs_use_todays_spelling(caplog):
    shipped = [*sorted((REPO / "configs" / "text").glob("*.yaml")), *sorted((REPO / "configs" / "clip").glob("*.yaml"))]
    for path in shipped:
        cls = TextConfig if path.parent.name == "text" else ClipConfig
        with caplog.at_level(logging.WARNING, logger="clipmag"):
            build_config(cls, path)
        assert _deprecations(caplog) == [], path
    for path in sorted((REPO / "configs" / "sweeps").glob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        assert current_spelling(text.split()) == text.split(), path


def test_a_sweep_argument_list_in_an_old_spelling_compares_equal_to_todays():
    old = ["data.objective=sts", "--train-shards", "d/train", "--val-shards=d/val", "model.name_or_path=m"]
    new = ["objective=sts", "--train", "d/train", "--validation=d/val", "model.name=m"]
    assert current_spelling(old) == new
    assert current_spelling(["reader.name_or_path=m", "data.trainer=x"]) == ["reader.name_or_path=m", "data.trainer=x"]


def test_the_objective_is_the_task_and_the_loss_family_is_loss_kind_in_both(caplog):
    """``objective`` once named the loss family in the text trainer (``infonce``) and the task in the
    image-text trainer; it is the task in both now, the loss family ``loss.kind`` in both, and the
    old text value still reads, with one warning."""
    text = text_cli.parse_args(["--siglip"])
    clip = clip_cli.parse_args(["--siglip", "--objective", "i2t"])
    assert (text.objective, text.loss.kind) == ("retrieval", "siglip")
    assert (clip.objective, clip.loss.kind) == ("i2t", "siglip")
    with caplog.at_level(logging.WARNING, logger="clipmag"):
        old = text_cli.parse_args(["objective=infonce"])
    assert old.objective == "retrieval"
    said = [r.getMessage() for r in caplog.records]
    assert [m for m in said if "objective=infonce is the old spelling, it is now objective=retrieval" in m], said


def test_a_clip_config_file_from_before_the_lists_reads_one_set_as_a_list_of_one(tmp_path, caplog):
    """``data.validation`` / ``data.test`` are lists in both trainers; an image-text config file (or a
    stored run's) that gives one shard set as a string still reads, with one warning per key."""
    path = tmp_path / "old.yaml"
    path.write_text("data:\n  train: d/train\n  validation: d/val\n  test: d/test\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="clipmag"):
        cfg = build_config(ClipConfig, path, [])
    assert (cfg.data.validation, cfg.data.test) == (["d/val"], ["d/test"])
    assert sum("takes a list now" in r.getMessage() for r in caplog.records) == 2
