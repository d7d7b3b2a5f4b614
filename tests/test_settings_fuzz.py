"""Every declared setting of every console script, fuzzed with edge values: zero, negatives, numbers
too large for the type, inf and nan in every spelling the command line and YAML have, empty text and
lists, wrong types and unknown keys. The parse-and-validate step (no work done) either refuses the
value in one ``ConfigError`` line naming the key or returns a config holding only finite numbers.
A trainer's accepted config is then handed to what consumes it first - the seeds to every generator,
the optimizer and schedule to torch, the loss and head to a step on real embeddings - and a value one
of them refuses (``optim.betas=[-1, -1]``, ``train.seed=-1``), or a loss that is not finite, fails
the test: the key's range belongs in its type, checked at parsing.

The keys come from the config dataclasses themselves, so a renamed or added key is fuzzed without
touching this file. Hypothesis runs derandomized with a fixed number of examples per tool.
"""

from __future__ import annotations

import dataclasses
import math
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import tomllib
from conftest import REPO, run_python
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from text_fixtures import tiny_train_args, write_code_search_set, write_tiny_bert

from clipmag.config.build import to_dict
from clipmag.config.checks import alternatives, config_fields
from clipmag.config.command_line import field_flags, parse_cli, parse_cli_and_file
from clipmag.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class Tool:
    """A console script's parse-and-validate step: its config class, the step, and the fewest words it
    needs to accept a command (its required folders and sources)."""

    config: type
    parse: Callable[[list[str]], Any]
    base: tuple[str, ...] = ()


def _tools() -> dict[str, Tool]:
    from clipmag.registry.config_packages import config_path
    from clipmag_experiments import cli as experiments
    from clipmag_experiments.sweep import rerun
    from clipmag_experiments.sweep.run import SweepConfig
    from image_text import cli as clip_cli
    from image_text.data import shards_cli as clip_shards
    from text_retrieval import cli as text_cli
    from text_retrieval.data import shards_cli as text_shards
    from text_retrieval.evaluation import cli as eval_text
    from text_retrieval.predict import cli as predict
    from text_retrieval.predict import start_diagnostics
    from text_retrieval.rag import cli as rag
    from text_retrieval.retrieval import mine_cli
    from text_retrieval.serving import cli as index

    def flat(cls: type, positional: str | None = None) -> Callable[[list[str]], Any]:
        return lambda argv: parse_cli(cls, argv, field_flags(cls), positional=positional)

    def sweep(cls: type, flags: dict[str, str]) -> Callable[[list[str]], Any]:
        return lambda argv: parse_cli_and_file(cls, argv, flags)

    demo = experiments.DEMO_SWEEP
    return {
        "clipmag-train-text": Tool(text_cli.TextConfig, text_cli.parse_args),
        "clipmag-train-clip": Tool(clip_cli.ClipConfig, clip_cli.parse_args),
        "clipmag-eval-text": Tool(eval_text.EvalTextConfig, eval_text.parse_args, ("--model", "m", "--data", "d")),
        "clipmag-eval-rag": Tool(rag.RagCommand, rag.parse_args),
        "clipmag-predict-norm": Tool(predict.PredictConfig, predict.parse_args),
        "clipmag-start-diagnostics": Tool(
            start_diagnostics.StartDiagnosticsConfig, start_diagnostics.parse_args, ("--output", "o")
        ),
        "clipmag-make-text-shards": Tool(text_shards.TextShardsCommand, text_shards.parse_args, ("out", "--bundled")),
        "clipmag-make-clip-shards": Tool(
            clip_shards.ClipShardsCommand, clip_shards.parse_args, ("--output", "o", "--bundled")
        ),
        "clipmag-mine-negatives": Tool(
            mine_cli.MineConfig, mine_cli.parse_args, ("--model", "m", "--data", "d", "--output", "o")
        ),
        "clipmag-index build": Tool(index.BuildCommand, flat(index.BuildCommand)),
        "clipmag-index query": Tool(index.QueryCommand, flat(index.QueryCommand)),
        "clipmag-sweep": Tool(experiments.SweepCommand, sweep(experiments.SweepCommand, experiments.SWEEP_FLAGS)),
        "clipmag-sweep plan": Tool(experiments.PlanCommand, sweep(experiments.PlanCommand, experiments.SWEEP_FLAGS)),
        "clipmag-report": Tool(experiments.ReportCommand, flat(experiments.ReportCommand, "runs_dir")),
        "clipmag-rerun-cell": Tool(rerun.RerunCommand, flat(rerun.RerunCommand, "cell")),
        "clipmag-demo": Tool(SweepConfig, lambda argv: parse_cli_and_file(SweepConfig, argv, {}, config_path(demo))),
    }


TOOLS = _tools()
TRAINERS = (TOOLS["clipmag-train-text"].config, TOOLS["clipmag-train-clip"].config)
# Console scripts whose command line is another project's (argparse), not a config dataclass.
NOT_DATACLASS = {"clipmag-eval-clip-benchmark": "CLIP-benchmark's own command line"}

# Every way the command line (YAML-parsed words, where 1e999 is a float) and a YAML file spell inf and nan.
NON_FINITE = ("inf", "-inf", "Infinity", "-Infinity", "1e999", "-1e999", "1.0e+999", "nan", "NaN", ".inf", "-.inf")
NON_FINITE += (".Inf", ".INF", ".nan", ".NaN", ".NAN", "+.inf")
EDGES: dict[type, tuple[str, ...]] = {
    float: ("0", "-1", "1e-999", "1e308", "9" * 400, *NON_FINITE),
    int: ("0", "-1", "-9223372036854775809", "9223372036854775808", "9" * 30, "1e999", ".nan", "2.5"),
    str: ("", "''", "0", "~", "null"),
    bool: ("yes", "2", "''"),
    list: ("[]", "[.nan]", "[1e999, 0]", "[[]]", "[{}]"),
    dict: ("{}", "{a: .nan}", "[]"),
}
WRONG_TYPES = ("abc", "[]", "{}", "true", "null", "-0", "''")


def leaf_keys(cls: type, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Every settable dotted key of a config class with its annotated type (sections walked into)."""
    for name, tp in config_fields(cls).items():
        if dataclasses.is_dataclass(tp):
            yield from leaf_keys(tp, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", tp


def edge_texts(tp: Any) -> list[str]:
    """The edge spellings for a key of type ``tp``: those of each plain type it admits, then wrong types."""
    texts = [text for plain in alternatives(tp) for text in EDGES.get(plain, ())]
    return list(dict.fromkeys(texts + list(WRONG_TYPES)))


def yaml_file(folder: Path, key: str, text: str) -> Path:
    """A YAML config setting dotted ``key`` to the YAML scalar ``text`` (nested one section a level)."""
    parts = key.split(".")
    lines = [f"{'  ' * depth}{part}:" for depth, part in enumerate(parts[:-1])]
    lines.append(f"{'  ' * (len(parts) - 1)}{parts[-1]}: {text}")
    path = folder / "fuzz.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def non_finite_numbers(tree: Any, prefix: str = "") -> list[str]:
    """The dotted keys of a config's plain tree whose values hold inf or nan."""
    if isinstance(tree, dict):
        return [key for name, value in tree.items() for key in non_finite_numbers(value, f"{prefix}{name}.")]
    if isinstance(tree, list):
        return [key for value in tree for key in non_finite_numbers(value, prefix)]
    return [prefix.rstrip(".")] if isinstance(tree, float) and not math.isfinite(tree) else []


def names(message: str, key: str) -> bool:
    """Whether a refusal names ``key``: dotted, as a positional word (``OUT_DIR``), or its section
    (``section 'data':``) and its own name."""
    section, _, own = key.rpartition(".")
    return key in message or key.upper() in message or (f"section {section!r}" in message and own in message)


def consume(cfg: Any) -> None:
    """Hand a trainer's accepted config to its first consumers: raises what any of them raises, or an
    ``AssertionError`` for a first step whose loss or learned scale is not finite."""
    import numpy as np
    import torch

    from clipmag.scoring.heads import build_head
    from clipmag.scoring.losses import loss_from_config
    from clipmag.train.engine import seed_everything
    from clipmag.train.optimizer import build_optimizer, build_scheduler

    seed_everything(cfg.train.seed)
    seed_everything((cfg.train.seed + 7) % 2**32)  # a later rank's seed
    bundled_seed = getattr(cfg.data, "bundled_seed", None)
    if bundled_seed is not None:
        np.random.SeedSequence(bundled_seed).spawn(1)  # the CLIP trainer's bundled digits
    model = torch.nn.Module()
    model.embed = torch.nn.Linear(4, 4)
    model.head, model.loss = build_head(cfg.head), loss_from_config(cfg.loss)
    optimizer = build_optimizer(model, cfg.optim)
    build_scheduler(optimizer, cfg.optim, cfg.train.steps)
    model.loss.clamp_scale_()
    query, documents = model.embed(torch.randn(3, 4)), model.embed(torch.randn(3, 4)).unsqueeze(1)
    out = model.loss(query, documents, model.head)
    largest = torch.tensor(model.loss.max_log_scale).exp()  # the scale a learned one may reach
    assert bool(torch.isfinite(out["loss"])) and bool(torch.isfinite(largest)), f"loss {out['loss']}, scale {largest}"


def check_outcome(tool: Tool, argv: Sequence[str], key: str) -> None:
    """Refused in one ConfigError line naming ``key``, or accepted with every number finite (and, for a
    trainer, taken by every consumer of its settings: :func:`consume`)."""
    try:
        cfg = tool.parse([*tool.base, *argv])
    except ConfigError as err:
        message = str(err)
        assert "\n" not in message, f"{argv}: a refusal of more than one line: {message!r}"
        assert names(message, key), f"{argv}: the refusal does not name {key!r}: {message}"
        return
    tree = to_dict(cfg[0] if isinstance(cfg, tuple) else cfg)
    assert not non_finite_numbers(tree), f"{argv}: accepted a non-finite number at {non_finite_numbers(tree)}"
    if tool.config in TRAINERS:
        try:
            consume(cfg)
        except Exception as err:  # any consumer's refusal: the parse step should have named the key
            raise AssertionError(f"{argv}: accepted, then refused by a consumer: {type(err).__name__}: {err}") from err


def test_a_value_a_consumer_refuses_fails_the_fuzz_check():
    """The check above catches what the parse step once let through: a consumer's refusal of an
    accepted value is an assertion, not a pass (here: a betas pair torch refuses, handed over directly)."""
    tool = TOOLS["clipmag-train-text"]
    cfg = tool.parse([])
    cfg.optim.betas = (-1.0, -1.0)
    with pytest.raises(ValueError, match="Invalid beta parameter"):
        consume(cfg)


FUZZ = settings(
    max_examples=80, derandomize=True, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)


def test_every_console_script_is_fuzzed():
    scripts = set(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"])
    fuzzed = {name.split()[0] for name in TOOLS}
    assert scripts == fuzzed | set(NOT_DATACLASS)


@pytest.mark.parametrize("name", sorted(TOOLS))
@FUZZ
@given(data=st.data())
def test_every_setting_refused_in_one_line_or_accepted_finite(name, data):
    tool = TOOLS[name]
    key, tp = data.draw(st.sampled_from(sorted(leaf_keys(tool.config))), label="key")
    text = data.draw(st.sampled_from(edge_texts(tp)), label="value")
    if data.draw(st.booleans(), label="in a YAML file"):
        with tempfile.TemporaryDirectory() as folder:
            check_outcome(tool, ["--config", str(yaml_file(Path(folder), key, text))], key)
    else:
        check_outcome(tool, [f"{key}={text}"], key)


@pytest.mark.parametrize("name", sorted(TOOLS))
@FUZZ
@given(data=st.data())
def test_unknown_keys_are_named(name, data):
    tool = TOOLS[name]
    sections = sorted({key.rpartition(".")[0] for key, _ in leaf_keys(tool.config)})
    section = data.draw(st.sampled_from(sections), label="section")
    word = data.draw(st.from_regex(r"[a-z][a-z_]{0,10}", fullmatch=True), label="word")
    key = f"{section}.{word}" if section else word
    declared = {k for k, _ in leaf_keys(tool.config)} | {s for s in sections if s}
    if key in declared or any(d.startswith(f"{key}.") for d in declared):
        return
    with pytest.raises(ConfigError, match="unknown key") as err:
        tool.parse([*tool.base, f"{key}=1"])
    assert "\n" not in str(err.value) and key in str(err.value)


@pytest.mark.parametrize("name", ["clipmag-train-text", "clipmag-train-clip"])
@pytest.mark.parametrize(
    "word, key",
    [
        ("optim.betas=[-1,-1]", "optim.betas"),
        ("optim.betas=[0.9,1.0]", "optim.betas"),
        ("optim.betas=[]", "optim.betas"),
        ("train.seed=-1", "train.seed"),
        (f"train.seed={2**32}", "train.seed"),
        ("loss.max_scale=1e300", "loss.max_scale"),
        ("loss.scale=1e300", "loss.scale"),
    ],
)
def test_a_value_torch_or_numpy_would_refuse_later_is_refused_naming_its_key(name, word, key):
    with pytest.raises(ConfigError, match=rf"key '{key}' expects|optim.betas takes two values") as err:
        TOOLS[name].parse([word])
    assert "\n" not in str(err.value) and key in str(err.value)


def test_the_clip_trainers_bundled_seed_is_a_seed():
    with pytest.raises(ConfigError, match=r"key 'data.bundled.seed' expects int >= 0 and <= 4294967295, got -1"):
        TOOLS["clipmag-train-clip"].parse(["data.bundled.seed=-1"])


@pytest.mark.parametrize("name", ["clipmag-train-text", "clipmag-train-clip"])
@pytest.mark.parametrize("spelling", [["--lr", "1e999"], ["optim.lr=nan"], ["optim.lr=.inf"]])
def test_a_learning_rate_of_inf_or_nan_is_refused(name, spelling, tmp_path):
    with pytest.raises(ConfigError, match="optim.lr"):
        TOOLS[name].parse(spelling)
    with pytest.raises(ConfigError, match="key 'optim.lr' expects a finite number"):
        TOOLS[name].parse(["--config", str(yaml_file(tmp_path, "optim.lr", ".inf"))])


@pytest.fixture(scope="module")
def tiny_text(tmp_path_factory):
    """A 2-layer BERT and the stdlib code-search pairs as shards and a BEIR set."""
    root = tmp_path_factory.mktemp("fuzz_text")
    write_tiny_bert(root / "bert")
    write_code_search_set(root)
    return root


@pytest.mark.slow
@pytest.mark.parametrize(
    "edge",
    [
        ["optim.lr=0", "optim.warmup_steps=0", "head.gq=0"],  # nothing learns: the step still runs
        ["optim.lr=1e308", "loss.max_scale=1e-300", "--norm", "dnorm"],  # at the edge of float range
        ["data.hard_negatives=0", "train.eval_every=0", "train.save_every=0", "optim.clip_grad_norm=0"],
    ],
    ids=["zeros", "huge", "off"],
)
def test_accepted_edge_configs_train_one_step_or_stop_in_one_line(tiny_text, tmp_path, edge):
    """An edge config the parse step accepts runs to its end, or stops with one ``error:`` line."""
    args = tiny_train_args(tiny_text / "bert", tiny_text, tmp_path / "run", "train.steps=1", *edge)
    proc = run_python(REPO / "scripts" / "train_text.py", args, check=False)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    if proc.returncode != 0:
        assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1].startswith("error: "), proc.stderr[-3000:]
