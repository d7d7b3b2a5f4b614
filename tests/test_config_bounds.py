"""Reading a config is bounded: aliases that expand a small file into a huge value (an "alias bomb")
are refused in one line within a second, and an error quotes only a short prefix of a value."""

from __future__ import annotations

import time

import pytest

from clipmag.config.build import MAX_CONFIG_VALUES, parse_value, read_yaml
from clipmag.config.entry import run_entry_point
from clipmag.errors import ConfigError


def _bomb_levels(levels: int = 9) -> list[str]:
    """``l0`` holds ten strings, each next level ten aliases of the one before: nine levels are a
    billion strings, written in about 400 bytes."""
    entries = ["l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    entries += [f"l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 10)}]" for n in range(1, levels)]
    return entries


def _alias_bomb(levels: int = 9) -> str:
    """The bomb under a key the trainer reads: ``data.test: *l8``."""
    return "data:\n" + "".join(f"  {entry}\n" for entry in _bomb_levels(levels)) + f"  test: *l{levels - 1}\n"


def test_an_alias_bomb_under_a_real_key_is_one_line_within_a_second(tmp_path, capsys):
    from text_retrieval.cli import main

    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(_alias_bomb())
    start = time.perf_counter()
    with pytest.raises(SystemExit):
        run_entry_point(main, ["--config", str(bomb), f"train.output_dir={tmp_path / 'run'}"])
    elapsed = time.perf_counter() - start
    err = capsys.readouterr().err.strip()
    assert elapsed < 1.0 and len(err) < 300 and "\n" not in err
    assert err.startswith(f"error: {bomb}: line ") and f"expand to more than {MAX_CONFIG_VALUES:,} values" in err
    assert not (tmp_path / "run").exists()


def test_an_alias_that_holds_itself_is_refused():
    with pytest.raises(ConfigError, match=r"^x.yaml: line 1: an alias refers to the value that holds it"):
        read_yaml("a: &a [*a]\n", "x.yaml")


def test_a_bomb_on_the_command_line_is_refused_too():
    bomb = "{" + ", ".join(_bomb_levels()) + "}"
    with pytest.raises(ConfigError, match=r"^command line: line 1: its aliases"):
        parse_value(bomb)


def test_aliases_within_the_bound_still_read():
    """A sweep reuses a grid's variants in a second group through an alias (clip_emoji.yaml)."""
    text = "a: &grid [{name: s1}, {name: s2}]\nb: *grid\n"
    assert read_yaml(text, "x.yaml") == {"a": [{"name": "s1"}, {"name": "s2"}], "b": [{"name": "s1"}, {"name": "s2"}]}


def test_a_wrong_value_is_quoted_by_a_short_prefix(tmp_path):
    from clipmag.config.build import build_config
    from text_retrieval.config import TextConfig

    config = tmp_path / "long.yaml"
    config.write_text("train:\n  steps: [" + ", ".join(["123456789"] * 5000) + "]\n")
    with pytest.raises(ConfigError) as err:
        build_config(TextConfig, config)
    assert "key 'train.steps' expects" in str(err.value) and len(str(err.value)) < 200
