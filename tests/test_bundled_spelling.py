"""The offline sets were once spelt ``embedded``, in values (``embedded:indomain``), keys
(``data.embedded.root``, ``data.embedded_seed``, ``embedded_root``) and flags (``--embedded-train``):
the old spelling still resolves to the same config, with one warning line naming both, and a stored
run written with it is the same run as a new one."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import yaml

from clipmag.config.build import build_config, config_from_dict, to_dict
from clipmag.config.spellings import current_spelling
from clipmag.errors import ConfigError
from clipmag_experiments.cells.same_run import run_identity
from clipmag_experiments.design.grid import Cell
from clipmag_experiments.design.protocol import read_protocol, record_start
from clipmag_experiments.sweep import run as sweep
from image_text.config import ClipConfig
from image_text.data import shards_cli as clip_shards
from text_retrieval.config import TextConfig
from text_retrieval.data import shards_cli as text_shards
from text_retrieval.predict.config import PredictConfig
from text_retrieval.rag.config import RagConfig
from text_retrieval.retrieval.mine_cli import parse_args as mine_parse

REPO = Path(__file__).resolve().parents[1]
# A finished cell of the stored positive-regime sweep, whose argument list says embedded:indomain.
MINE = ["--model", "m", "--data", "bundled", "--output", "o"]
STORED_CELL = REPO / "results" / "positive_regime" / "scale-grid" / "splade" / "dnorm-scale5" / "seed0"


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


@pytest.mark.parametrize(
    ("cls", "old", "new", "read"),
    [
        (
            TextConfig,
            "data.test=[embedded:indomain, embedded:outdomain]",
            "data.test=[bundled:indomain, bundled:outdomain]",
            lambda c: c.data.test,
        ),
        (TextConfig, "data.train=embedded", "data.train=bundled", lambda c: c.data.train),
        (ClipConfig, "data.train=embedded", "data.train=bundled", lambda c: c.data.train),
        (RagConfig, "data.source=embedded", "data.source=bundled", lambda c: c.data.source),
        (PredictConfig, "data=embedded", "data=bundled", lambda c: c.data),
    ],
)
def test_the_old_spelling_resolves_to_the_new_one_with_one_warning(cls, old, new, read, caplog):
    with caplog.at_level(logging.WARNING, logger="clipmag"):
        given_new = build_config(cls, None, [new])
    assert _warnings(caplog) == []
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="clipmag"):
        given_old = build_config(cls, None, [old])
    (line,) = _warnings(caplog)
    assert old.split("=")[0] in line and "embedded" in line and "bundled" in line and "old spelling" in line
    assert to_dict(given_old) == to_dict(given_new) and "embedded" not in str(read(given_old))


def test_a_config_file_with_the_old_spelling_is_read_in_the_new_one(tmp_path, caplog):
    path = tmp_path / "old.yaml"
    path.write_text("data:\n  train: embedded\n  test: [embedded:indomain]\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="clipmag"):
        cfg = build_config(TextConfig, path)
    assert (cfg.data.train, cfg.data.test) == ("bundled", ["bundled:indomain"])
    assert len(_warnings(caplog)) == 2 and all(str(path) in line for line in _warnings(caplog))


def test_an_unknown_bundled_part_is_still_named():
    cfg = build_config(TextConfig, None, ["data.test=[embedded:nowhere]"])
    assert cfg.data.test == ["bundled:nowhere"]  # respelled; the task refuses it naming the valid parts


def _stored_cell(argv: list[str]) -> Cell:
    record = json.loads((STORED_CELL / "cell.json").read_text(encoding="utf-8"))
    return Cell(
        record["group"], record["kind"], record["model"], record["head"], record["variant"], 0, STORED_CELL, argv
    )


def test_a_stored_cell_of_the_old_spelling_is_the_same_run_as_the_new_spelling(monkeypatch):
    monkeypatch.chdir(REPO)  # the stored argument list names configs/ relative to the repository
    stored = json.loads((STORED_CELL / "cell.json").read_text(encoding="utf-8"))["argv"]
    assert "data.test=[embedded:indomain]" in stored
    respelled = [a.replace("embedded:", "bundled:") for a in stored]
    assert run_identity(_stored_cell(stored)) == run_identity(_stored_cell(respelled)) is not None
    other = [a.replace("embedded:indomain", "bundled:outdomain") for a in stored]
    assert run_identity(_stored_cell(other)) != run_identity(_stored_cell(respelled))


def _sweep(tmp_path: Path, spelling: str) -> sweep.SweepConfig:
    group = sweep.SweepGroup(
        name="g", kind="text", heads=["cosine"], seeds=[0], args=[f"data.test=[{spelling}:indomain]"]
    )
    return sweep.SweepConfig(output_dir=str(tmp_path / "runs"), groups=[group])


def test_a_sweep_protocol_stored_with_the_old_spelling_is_the_same_protocol(tmp_path, caplog):
    record_start(_sweep(tmp_path, "embedded"))
    with caplog.at_level(logging.WARNING, logger="clipmag"):
        record_start(_sweep(tmp_path, "bundled"))
    assert "sweep config changed" not in caplog.text and len(read_protocol(tmp_path / "runs")) == 2
    with caplog.at_level(logging.WARNING, logger="clipmag"):
        record_start(_sweep(tmp_path, "other"))
    assert "sweep config changed" in caplog.text


# The keys were renamed too: data.embedded.* -> data.bundled.*, embedded_seed/_root/_questions -> bundled_*.
RENAMED_KEY_CASES = [
    (TextConfig, "data.embedded.root", "data.bundled.root", "runs/elsewhere", lambda c: c.data.bundled.root),
    (TextConfig, "data.embedded.corpus_size", "data.bundled.corpus_size", "7", lambda c: c.data.bundled.corpus_size),
    (ClipConfig, "data.embedded.per_class", "data.bundled.per_class", "3", lambda c: c.data.bundled.per_class),
    (ClipConfig, "data.embedded_seed", "data.bundled.seed", "5", lambda c: c.data.bundled.seed),
    (RagConfig, "data.embedded_root", "data.bundled_root", "runs/rag-here", lambda c: c.data.bundled_root),
    (RagConfig, "data.embedded_questions", "data.bundled_questions", "9", lambda c: c.data.bundled_questions),
]


def _yaml_of(dotted: str, value: str) -> str:
    *parents, leaf = dotted.split(".")
    return (
        "".join(f"{'  ' * depth}{part}:\n" for depth, part in enumerate(parents))
        + f"{'  ' * len(parents)}{leaf}: {value}\n"
    )


@pytest.mark.parametrize(("cls", "old", "new", "value", "read"), RENAMED_KEY_CASES)
def test_an_old_key_on_the_command_line_is_the_new_key_with_one_warning(cls, old, new, value, read, caplog):
    with caplog.at_level(logging.WARNING, logger="clipmag"):
        given_new = build_config(cls, None, [f"{new}={value}"])
    assert _warnings(caplog) == []
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="clipmag"):
        given_old = build_config(cls, None, [f"{old}={value}"])
    (line,) = _warnings(caplog)
    assert f"'{old}'" in line and f"'{new}'" in line and "deprecated" in line
    assert to_dict(given_old) == to_dict(given_new) and str(read(given_new)) == value != str(read(cls()))


@pytest.mark.parametrize(("cls", "old", "new", "value", "read"), RENAMED_KEY_CASES)
def test_an_old_key_in_a_config_file_is_the_new_key_with_one_warning(cls, old, new, value, read, tmp_path, caplog):
    (tmp_path / "new.yaml").write_text(_yaml_of(new, value), encoding="utf-8")
    (tmp_path / "old.yaml").write_text(_yaml_of(old, value), encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="clipmag"):
        given_old = build_config(cls, tmp_path / "old.yaml")
    (line,) = _warnings(caplog)
    assert str(tmp_path / "old.yaml") in line and "embedded" in line and "bundled" in line and "deprecated" in line
    assert to_dict(given_old) == to_dict(build_config(cls, tmp_path / "new.yaml"))
    assert str(read(given_old)) == value


@pytest.mark.parametrize(("cls", "old", "new", "value", "read"), RENAMED_KEY_CASES)
def test_a_saved_config_tree_with_an_old_key_rebuilds_in_the_new_spelling(cls, old, new, value, read, caplog):
    """``config_from_dict`` (a checkpoint's saved config) reads the old spellings as a config file does."""
    saved = yaml.safe_load(_yaml_of(old, value))
    with caplog.at_level(logging.WARNING, logger="clipmag"):
        rebuilt = config_from_dict(cls, saved, "latest.pt")
    (line,) = _warnings(caplog)
    assert line.startswith("latest.pt: ") and "embedded" in line and "bundled" in line and "deprecated" in line
    assert to_dict(rebuilt) == to_dict(build_config(cls, None, [f"{new}={value}"]))


def test_a_renamed_section_under_both_names_is_joined_or_refused_naming_the_key(tmp_path):
    path = tmp_path / "both.yaml"
    path.write_text("data:\n  bundled: {train: 9}\n  embedded: {root: x}\n", encoding="utf-8")
    bundled = build_config(TextConfig, path).data.bundled
    assert (bundled.root, bundled.train) == ("x", 9)
    path.write_text("data:\n  bundled: {root: y}\n  embedded: {root: x}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"'data\.embedded\.root' and 'data\.bundled\.root' both given.*keep"):
        build_config(TextConfig, path)


@pytest.mark.parametrize(
    ("parse", "old", "new"),
    [
        (
            clip_shards.parse_args,
            ["--output", "o", "--embedded", "--embedded-train", "4"],
            ["--output", "o", "--bundled", "--bundled-train", "4"],
        ),
        (
            text_shards.parse_args,
            ["o", "--embedded", "--embedded-root", "r"],
            ["o", "--bundled", "--bundled-root", "r"],
        ),
        (mine_parse, [*MINE, "--embedded-root", "r"], [*MINE, "--bundled-root", "r"]),
    ],
)
def test_an_old_flag_of_a_tool_is_the_new_flag_with_one_warning_each(parse, old, new, caplog):
    with caplog.at_level(logging.WARNING, logger="clipmag"):
        given_old = parse(old)
    old_flags = [word for word in old if word.startswith("--embedded")]
    lines = _warnings(caplog)
    assert len(lines) == len(old_flags) and all(f in line and "deprecated" in line for f, line in zip(old_flags, lines))
    assert to_dict(given_old) == to_dict(parse(new))


def test_the_old_flags_are_not_offered_in_help(capsys):
    with pytest.raises(SystemExit):
        clip_shards.parse_args(["--help"])
    shown = capsys.readouterr().out
    assert "--bundled-train" in shown and "--embedded" not in shown


def test_a_stored_cell_given_an_old_key_is_the_same_run_as_the_new_key(monkeypatch):
    monkeypatch.chdir(REPO)
    stored = json.loads((STORED_CELL / "cell.json").read_text(encoding="utf-8"))["argv"]
    old = run_identity(_stored_cell([*stored, "data.embedded.n_dev=50"]))
    assert old == run_identity(_stored_cell([*stored, "data.bundled.validation=50"])) is not None
    assert old != run_identity(_stored_cell(stored))


def test_a_sweep_protocol_stored_with_an_old_key_is_the_same_protocol(tmp_path, caplog):
    def clip_sweep(key: str) -> sweep.SweepConfig:
        group = sweep.SweepGroup(name="g", kind="clip", heads=["cosine"], seeds=[0], args=[f"{key}=3"])
        return sweep.SweepConfig(output_dir=str(tmp_path / "runs"), groups=[group])

    record_start(clip_sweep("data.embedded_seed"))
    with caplog.at_level(logging.WARNING, logger="clipmag"):
        record_start(clip_sweep("data.bundled.seed"))
    assert "sweep config changed" not in caplog.text
    with caplog.at_level(logging.WARNING, logger="clipmag"):
        record_start(clip_sweep("train.seed"))
    assert "sweep config changed" in caplog.text


def test_stored_config_trees_compare_in_todays_spelling_keys_included():
    stored = {"data": {"embedded": {"root": "runs/data/text-embedded"}, "embedded_seed": 1}}
    assert current_spelling(stored) == current_spelling(
        {"data": {"bundled": {"root": "runs/data/text-bundled"}, "bundled_seed": 1}}
    )
