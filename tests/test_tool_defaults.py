"""One set of defaults per tool: ``--config FILE`` changes the keys the file holds and nothing else,
and every console script's ``--help`` says what it does, shows examples and lists the values a run of
the same arguments would use."""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import importlib
import io
import re
import sys
from importlib.metadata import distribution
from typing import Any

import pytest

from image_text.cli import parse_args as parse_clip
from text_retrieval.cli import parse_args as parse_text

# pyproject.toml's [project.scripts], as installed
SCRIPTS = {e.name: e.value for e in distribution("clipmag").entry_points if e.group == "console_scripts"}
VALUE_LINE = re.compile(r"^  ([\w.]+) = (.*?)   \(.*\)$")


def _flat(cfg: Any, prefix: str = "") -> dict[str, Any]:
    """Every dotted key of a config tree with its value."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if dataclasses.is_dataclass(value):
            out.update(_flat(value, f"{prefix}{f.name}."))
        else:
            out[f"{prefix}{f.name}"] = value
    return out


def _help(entry: str, argv: list[str], monkeypatch: pytest.MonkeyPatch) -> str:
    """What the console script ``entry`` (``module:function``) prints for ``argv``; it must exit 0."""
    module, function = entry.split(":")
    monkeypatch.setattr(sys, "argv", ["tool", *argv])
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as stop:
        getattr(importlib.import_module(module), function)()
    assert stop.value.code in (0, None), out.getvalue()[-2000:]
    return out.getvalue()


def _help_values(text: str) -> dict[str, Any]:
    return {m.group(1): ast.literal_eval(m.group(2)) for line in text.splitlines() if (m := VALUE_LINE.match(line))}


@pytest.mark.parametrize(
    ("parse", "yaml_text", "flag"),
    [
        (parse_text, "head:\n  name: qnorm\n", ["--norm", "qnorm"]),
        (parse_text, "train:\n  steps: 3\n", ["--steps", "3"]),
        (parse_clip, "head:\n  name: dnorm\n", ["--norm", "dnorm"]),
    ],
)
def test_a_one_key_yaml_changes_that_key_only(tmp_path, parse, yaml_text, flag):
    path = tmp_path / "one.yaml"
    path.write_text(yaml_text)
    from_file, from_flag, default = _flat(parse(["--config", str(path)])), _flat(parse(flag)), _flat(parse([]))
    assert from_file == from_flag
    changed = {key for key in default if default[key] != from_file[key]}
    assert len(changed) == 1, changed


def test_the_text_trainers_packaged_defaults_are_its_defaults(tmp_path):
    """A file layers over ``configs/text/default.yaml`` (the bundled run), not over the dataclasses."""
    (tmp_path / "lr.yaml").write_text("optim:\n  lr: 1.0e-4\n")
    cfg = parse_text(["--config", str(tmp_path / "lr.yaml")])
    assert cfg.optim.lr == 1e-4
    assert (cfg.train.steps, cfg.data.batch_size, cfg.model.query_max_length, cfg.data.validation) == (30, 16, 32, [])


@pytest.mark.parametrize(
    ("entry", "parse", "argv"),
    [
        ("text_retrieval.cli:entry", parse_text, []),
        (
            "text_retrieval.cli:entry",
            parse_text,
            ["--config", "configs/text/sts.yaml", "--norm", "dot", "train.steps=4"],
        ),
        ("image_text.cli:entry", parse_clip, []),
        ("image_text.cli:entry", parse_clip, ["--objective", "i2t", "--norm", "qnorm"]),
    ],
)
def test_help_lists_the_values_the_same_arguments_run_with(entry, parse, argv, monkeypatch):
    shown = _help_values(_help(entry, [*argv, "--help"], monkeypatch))
    resolved = _flat(parse(argv))
    assert shown == resolved


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_every_console_script_says_what_it_does_with_examples_and_values(script, monkeypatch):
    text = _help(SCRIPTS[script], ["--help"], monkeypatch)
    description = text.split("\n\n")[0]
    assert len(description.split()) >= 25, f"{script}: no paragraph saying what it does:\n{description}"
    examples = text.split("Examples:\n", 1)[1].split("\n\n")[0].splitlines() if "Examples:\n" in text else []
    commands = [line for line in examples if line.startswith("    ") and not line.startswith("     ")]
    assert 2 <= len(commands) <= 5, f"{script}: expected two or three examples, got {examples}"
    assert re.search(r"^  \S+ = ", text, re.M), f"{script}: --help shows no values"


def test_text_help_shows_the_packaged_defaults_a_plain_run_trains_with(monkeypatch):
    shown = _help_values(_help("text_retrieval.cli:entry", ["--help"], monkeypatch))
    assert (shown["optim.lr"], shown["train.steps"], shown["data.batch_size"]) == (5e-5, 30, 16)
