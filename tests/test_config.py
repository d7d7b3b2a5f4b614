"""Configuration: YAML + command line, checked before any work starts, with named errors."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import pytest
import yaml

from clipmag.config.build import build_config, config_yaml, to_dict
from clipmag.config.checks import PositiveInt
from clipmag.config.command_line import field_flags, help_text, parse_cli
from clipmag.errors import ConfigError
from clipmag.scoring.head_config import HeadConfig
from clipmag.scoring.loss_config import LossConfig
from clipmag.train.loop_config import TrainLoopConfig
from clipmag.train.optim_config import OptimConfig


@dataclass
class CoreSections:
    head: HeadConfig = field(default_factory=HeadConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: TrainLoopConfig = field(default_factory=TrainLoopConfig)


SHORT = {"norm": "head.name", "resume": "train.resume"}


def test_defaults_yaml_and_overrides_in_order(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("optim:\n  lr: 2.0e-5\n  betas: [0.9, 0.999]\ntrain:\n  steps: 7\n")
    cfg = parse_cli(
        CoreSections, ["--config", str(path), "--norm", "dnorm", "train.steps=9", "optim.gamma_lr=1e-3"], SHORT
    )
    assert cfg.head.name == "dnorm"
    assert cfg.optim.lr == 2e-5 and cfg.optim.betas == (0.9, 0.999) and cfg.optim.gamma_lr == 1e-3
    assert cfg.train.steps == 9
    assert cfg.train.resume is None
    assert parse_cli(CoreSections, ["--resume", "latest"], SHORT).train.resume == "latest"


def test_resolved_config_round_trips(tmp_path):
    cfg = parse_cli(CoreSections, ["--norm", "learnable", "head.gq=0.25"], SHORT)
    (tmp_path / "config.yaml").write_text(config_yaml(cfg))
    again = build_config(CoreSections, tmp_path / "config.yaml")
    assert to_dict(again) == to_dict(cfg) == yaml.safe_load((tmp_path / "config.yaml").read_text())


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--norm", "cos"], "key 'head.name' expects one of 'cosine', 'dot', 'qnorm', 'dnorm', 'learnable', got 'cos'"),
        (["optim.lrate=1"], "unknown key 'optim.lrate'; valid keys of 'optim': lr, betas"),
        (["model=x"], "unknown key 'model'; valid keys of the top level: head, loss, optim, train"),
        (["train.steps=ten"], "key 'train.steps' expects int, got 'ten'"),
        (["train.steps=1.5"], "key 'train.steps' expects int, got 1.5"),
        (["optim.lr"], "expected key=value or --flag, got 'optim.lr'"),
        (["train.grad_accum=0"], "key 'train.grad_accum' expects int >= 1, got 0"),
        (["train.chunk_size=-4"], "key 'train.chunk_size' expects int >= 0, got -4"),
        (["loss.scale=0"], "key 'loss.scale' expects float > 0 and <= 10000 or null, got 0"),
        (["loss.label_smoothing=1.5"], "key 'loss.label_smoothing' expects float >= 0 and <= 1, got 1.5"),
        (["optim.scale_lr=-1"], "key 'optim.scale_lr' expects float >= 0 or null, got -1"),
        (["--normalise", "dot"], "unknown flag --normalise; valid flags: --config, --norm, --resume"),
        (["--config", "/no/such.yaml"], "config file not found: /no/such.yaml"),
    ],
)
def test_bad_configuration_names_the_key(argv, message):
    with pytest.raises(ConfigError) as err:
        parse_cli(CoreSections, argv, SHORT)
    assert message in str(err.value)


def test_bad_yaml_key_names_the_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("loss:\n  temperature: 0.05\n")
    with pytest.raises(
        ConfigError, match=rf"{path}: unknown key 'loss.temperature'; valid keys of 'loss': direction, scale"
    ):
        build_config(CoreSections, path)


@dataclass
class Flat:
    model: list[str] = field(default_factory=list)
    norm: list[Literal["cosine", "dot"]] = field(default_factory=list)
    quiet: bool = False
    top_k: PositiveInt = 10
    output: str = "runs/x"
    prefix: str | None = None


def test_flags_take_the_values_their_key_types_call_for():
    cfg = parse_cli(Flat, ["--model", "a", "b/c", "--quiet", "--norm", "cosine", "dot", "top_k=3"], field_flags(Flat))
    assert cfg == Flat(model=["a", "b/c"], norm=["cosine", "dot"], quiet=True, top_k=3)
    # a list key given one word, YAML list syntax, an inline boolean and text that YAML would read as a number
    cfg = parse_cli(
        Flat, ["norm=dot", "model=[x, y]", "--quiet=false", "--output", "2024", "--prefix=null"], field_flags(Flat)
    )
    assert cfg == Flat(model=["x", "y"], norm=["dot"], quiet=False, output="2024", prefix=None)
    assert parse_cli(Flat, ["--prefix", "yes"], field_flags(Flat)).prefix == "yes"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--model", "--quiet"], "flag --model needs at least one value"),
        (["--top-k"], "flag --top-k needs a value"),
        (["--top-k", "0"], "key 'top_k' expects int >= 1, got 0"),
        (["--norm", "cos"], "key 'norm' expects one of 'cosine', 'dot', got 'cos'"),
    ],
)
def test_flag_errors_name_the_flag_or_key(argv, message):
    with pytest.raises(ConfigError) as err:
        parse_cli(Flat, argv, field_flags(Flat))
    assert message in str(err.value)


def test_help_lists_how_many_values_each_flag_takes():
    text = help_text(Flat(top_k=3), field_flags(Flat), "Evaluate things.")
    assert text.startswith("Evaluate things.")
    assert "--model                  sets model  (one or more values)" in text
    assert "--quiet                  sets quiet  (no value)" in text
    assert "top_k = 3   (int >= 1)" in text


@dataclass
class Tool:
    folder: str = ""
    quiet: bool = False


def test_a_positional_word_sets_its_key_once():
    assert parse_cli(Tool, ["runs/a", "--quiet"], field_flags(Tool), positional="folder") == Tool("runs/a", True)
    with pytest.raises(ConfigError, match="one FOLDER expected, got another: 'runs/b'"):
        parse_cli(Tool, ["runs/a", "runs/b"], field_flags(Tool), positional="folder")


def test_a_repeated_yaml_key_is_refused_naming_file_line_and_key(tmp_path):
    from clipmag.config.build import load_yaml

    path = tmp_path / "twice.yaml"
    path.write_text("train:\n  steps: 2\n  lr: 1\n  steps: 5\n")
    with pytest.raises(ConfigError, match=r"twice.yaml: line 4: key 'steps' appears twice \(first at line 2\)"):
        load_yaml(path)
    path.write_text("train:\n  steps: 2\nmodel:\n  steps: 5\n")  # the same name in two sections is fine
    assert load_yaml(path) == {"train": {"steps": 2}, "model": {"steps": 5}}
