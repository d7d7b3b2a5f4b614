"""One name for the head in every tool (``--norm``, ``head.name``; old keys work with a one-line
warning) and both trainers alike: the flags they share set keys of the same type and range."""

from __future__ import annotations

import logging
import re

import pytest
import tomllib
from conftest import REPO

from clipmag.config.build import key_type
from clipmag.errors import ConfigError
from clipmag.results.record import read_results
from clipmag.scoring.head_config import OWN_HEAD
from clipmag.train.trainer_flags import FRONT_END_VALUES, SHARED_TRAINER_FLAGS
from image_text import cli as clip_cli
from image_text.config import SHORTHANDS as CLIP_FLAGS
from image_text.config import ClipConfig
from image_text.evaluation.benchmark import benchmark_values, split_head_flag
from text_retrieval import cli as text_cli
from text_retrieval.config import TEXT_SHORTHANDS as TEXT_FLAGS
from text_retrieval.config import TextConfig
from text_retrieval.evaluation.cli import parse_args as parse_eval
from text_retrieval.predict.cli import parse_args as parse_predict
from text_retrieval.rag.cli import parse_args as parse_rag
from text_retrieval.retrieval.mine_cli import parse_args as parse_mine
from text_retrieval.serving.cli import parse_args as parse_index

EVAL = ["--model", "m", "--data", "d"]
MINE = ["--model", "m", "--data", "d", "--output", "out"]

# Every console script that scores with a head: its parse-and-resolve step (runs nothing), the words it
# needs beside the head, and the head the parsed command resolves to.
HEAD_TOOLS = {
    "clipmag-train-text": (text_cli.parse_args, [], lambda cfg: cfg.head.name),
    "clipmag-train-clip": (clip_cli.parse_args, [], lambda cfg: cfg.head.name),
    "clipmag-eval-text": (parse_eval, EVAL, lambda cfg: cfg.head.name),
    "clipmag-eval-rag": (parse_rag, [], lambda cfg: cfg.head.name),  # compares heads: a list
    "clipmag-eval-clip-benchmark": (split_head_flag, ["eval", "--no_amp"], lambda split: split[0]),
    "clipmag-mine-negatives": (parse_mine, MINE, lambda cfg: cfg.head.name),
    "clipmag-index": (parse_index, ["build", "--model", "m", "--corpus", "c"], lambda cfg: cfg.head.name),
}
# The console scripts that take no head, and why.
HEADLESS_TOOLS = {
    "clipmag-predict-norm": "predicts which head suits a model, scoring with its own dot head",
    "clipmag-start-diagnostics": "measures a start's norms before fine-tuning, whatever head it is given",
    "clipmag-make-text-shards": "writes training data",
    "clipmag-make-clip-shards": "writes training data",
    "clipmag-sweep": "runs the trainers, whose heads its YAML sets",
    "clipmag-report": "reads stored results",
    "clipmag-rerun-cell": "re-runs a sweep cell as it was configured",
    "clipmag-demo": "runs the trainers and evaluators with their defaults",
}


def _deprecations(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "deprecated" in r.getMessage()]


def test_norm_sets_head_name_in_every_tool():
    assert text_cli.parse_args(["--norm", "qnorm"]).head.name == "qnorm"
    assert clip_cli.parse_args(["--norm", "qnorm"]).head.name == "qnorm"
    assert parse_eval([*EVAL, "--norm", "dnorm"]).head.name == "dnorm"
    assert parse_eval(EVAL).head.name == OWN_HEAD  # the model's own
    assert parse_mine([*MINE, "--norm", "dot"]).head.name == "dot"
    assert parse_rag(["--norm", "cosine", "dot"]).head.name == ["cosine", "dot"]
    assert parse_rag(["head.name=[qnorm, model]"]).head.name == ["qnorm", "model"]


# Every tool that scores with a trained model, and what its parsed command holds for the model's own head.
OWN_HEAD_TOOLS = {
    "clipmag-eval-text": lambda words: parse_eval([*EVAL, *words]).head.name,
    "clipmag-mine-negatives": lambda words: parse_mine([*MINE, *words]).head.name,
    "clipmag-index": lambda words: parse_index(["build", "--model", "m", "--corpus", "c", *words]).head.name,
    "clipmag-eval-rag": lambda words: parse_rag(words).head.name[0],
    "clipmag-eval-clip-benchmark": lambda words: split_head_flag(words)[0],
}


@pytest.mark.parametrize("tool", sorted(OWN_HEAD_TOOLS))
def test_the_models_own_head_is_one_word_in_every_tool(tool, caplog):
    """``model`` names the model's own head wherever a head is chosen, ``--norm model`` as
    ``head.name=model``; where the default is one head, it is that word. The old ``null`` of the
    single-head tools still works, with one warning line."""
    parsed = OWN_HEAD_TOOLS[tool]
    assert parsed(["--norm", OWN_HEAD]) == parsed([f"head.name={OWN_HEAD}"]) == OWN_HEAD
    if tool in ("clipmag-eval-text", "clipmag-mine-negatives", "clipmag-index"):
        assert parsed([]) == OWN_HEAD
        with caplog.at_level(logging.WARNING, logger="clipmag"):
            assert parsed(["head.name=null"]) == OWN_HEAD
        assert [r.getMessage() for r in caplog.records if "old spelling" in r.getMessage()] == [
            f"command line: head.name=null is the old spelling, it is now head.name={OWN_HEAD} "
            "(the old one still works for now)"
        ]


def test_every_console_script_is_listed_as_taking_a_head_or_not():
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert set(scripts) == set(HEAD_TOOLS) | set(HEADLESS_TOOLS)


@pytest.mark.parametrize("tool", sorted(HEAD_TOOLS))
def test_norm_and_head_name_resolve_to_the_same_head_in_every_tool(tool):
    parse, needed, head = HEAD_TOOLS[tool]
    by_flag = head(parse([*needed, "--norm", "qnorm"]))
    assert by_flag == head(parse([*needed, "head.name=qnorm"])) == head(parse([*needed, "--norm=qnorm"]))
    assert by_flag == (["qnorm"] if tool == "clipmag-eval-rag" else "qnorm")


def test_a_tool_without_a_head_refuses_the_head_flag():
    with pytest.raises(ConfigError, match="unknown flag --norm"):
        parse_predict(["--model", "m", "--norm", "qnorm"])


def test_the_clip_benchmark_wrapper_keeps_its_head_flags_from_clip_benchmarks_prefixes():
    """CLIP-benchmark's parser would read ``--norm`` as its ``--normalize``: ours is taken out first,
    and a flag that only begins one of CLIP-benchmark's is refused rather than abbreviated."""
    values = benchmark_values(["eval", "--norm", "dnorm", "--no_amp"])
    assert values["head"] == "dnorm" and values["normalize"] is True and values["amp"] is False
    assert benchmark_values(["eval", "--head", "cosine"])["head"] == "cosine"
    with pytest.raises(ConfigError, match="--normal is not a flag of CLIP-benchmark, which would read it as --normal"):
        benchmark_values(["eval", "--normal", "x"])
    with pytest.raises(ConfigError, match="--head cosine, --norm dnorm name different heads"):
        split_head_flag(["--head", "cosine", "--norm", "dnorm"])
    with pytest.raises(ConfigError, match="--norm takes cosine or dot"):
        split_head_flag(["--norm", "l2"])


@pytest.mark.parametrize(
    ("parse", "argv", "old", "expected"),
    [
        (parse_eval, [*EVAL, "norm=dot"], "norm", "dot"),
        (parse_mine, [*MINE, "norm=qnorm"], "norm", "qnorm"),
        (parse_index, ["build", "norm=dnorm"], "norm", "dnorm"),
        (parse_rag, ["retrieval.norms=[cosine, dot]"], "retrieval.norms", ["cosine", "dot"]),
    ],
)
def test_an_old_head_key_still_works_with_one_warning_line(parse, argv, old, expected, caplog):
    with caplog.at_level(logging.WARNING, logger="clipmag"):
        assert parse(argv).head.name == expected
    (line,) = _deprecations(caplog)
    assert f"key '{old}' is deprecated, it is now 'head.name'" in line and "\n" not in line


def test_an_old_rag_yaml_key_still_works_naming_the_file(tmp_path, caplog):
    path = tmp_path / "old.yaml"
    path.write_text("retrieval:\n  models: [m]\n  norms: [qnorm, dnorm]\n")
    with caplog.at_level(logging.WARNING, logger="clipmag"):
        cmd = parse_rag(["--config", str(path)])
    assert cmd.head.name == ["qnorm", "dnorm"] and cmd.retrieval.models == ["m"]
    (line,) = _deprecations(caplog)
    assert line.startswith(f"{path}: key 'retrieval.norms'")
    path.write_text("retrieval:\n  norms: [qnorm]\nhead:\n  name: [dot]\n")
    with pytest.raises(ConfigError, match=r"keys 'retrieval.norms' and 'head.name' both given .*; keep 'head.name'"):
        parse_rag(["--config", str(path)])


def test_both_trainers_take_the_shared_flags_for_keys_of_one_type():
    for flag in ("model", "objective", "batch_size", "steps", "lr", "norm", "direction", "output", "resume"):
        assert flag in TEXT_FLAGS and flag in CLIP_FLAGS, flag
    assert {"seed", "precision"} <= set(SHARED_TRAINER_FLAGS)
    for flag, key in SHARED_TRAINER_FLAGS.items():
        assert TEXT_FLAGS[flag] == CLIP_FLAGS[flag] == key
        if flag not in FRONT_END_VALUES:
            assert key_type(TextConfig, key) == key_type(ClipConfig, key), key


@pytest.mark.parametrize("parse", [text_cli.parse_args, clip_cli.parse_args])
def test_the_shared_flags_mean_the_same_in_both_trainers(parse, tmp_path):
    argv = ["--batch-size", "8", "--steps", "0", "--lr", "1e-4", "--seed", "3", "--precision", "fp32"]
    cfg = parse([*argv, "--output", str(tmp_path), "--resume", "latest", "--direction", "auto"])
    assert (cfg.data.batch_size, cfg.train.steps, cfg.optim.lr, cfg.train.seed) == (8, 0, 1e-4, 3)
    assert (cfg.train.precision, cfg.train.output_dir, cfg.train.resume) == ("fp32", str(tmp_path), "latest")
    with pytest.raises(ConfigError, match=re.escape("key 'train.steps' expects int >= 0, got -1")):
        parse(["--steps", "-1"])
    with pytest.raises(ConfigError, match="data.batch_size must be >= 2 for in-batch negatives"):
        parse(["--batch-size", "1"])


def test_a_clip_run_of_zero_steps_tests_the_start_itself(tmp_path):
    """``--steps 0`` (an untuned cell in a sweep) trains nothing and tests the starting model."""
    micro = ["model.name=clipmag-micro", "data.bundled.train=64", "data.bundled.validation=16", "data.bundled.test=32"]
    micro += ["data.bundled.per_class=2", "train.tensorboard=false", "train.progress=false", "train.device=cpu"]
    clip_cli.main([*micro, "--steps", "0", "--batch-size", "8", "--output", str(tmp_path / "run")])
    results = read_results(tmp_path / "run" / "results.json")
    assert results["run"]["steps"] == 0 and results["checkpoint"]["step"] == 0
