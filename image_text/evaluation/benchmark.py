r"""CLIP-benchmark on clipmag checkpoints: runs CLIP-benchmark's own command line (its datasets,
tasks, templates and metrics, and its JSON output) on an exported clipmag image-text model:
``--model_type clipmag`` with ``--pretrained`` naming one of our export folders, run folders or
checkpoints (``--model`` is only a label in the output file name). CLIP-benchmark itself
L2-normalises both towers' features, so its own numbers are cosine whatever head the model was
trained with; ``--head model`` (the default) scores zero-shot classification and retrieval with
the model's head record instead, ``--norm NAME`` (or ``head.name=NAME``, as in every clipmag tool)
with the head NAME and ``--head cosine`` with cosine, all through
:mod:`image_text.evaluation.benchmark_scoring`. CLIP-benchmark's flags are written in full: a flag that only
begins one of them (``--norm`` would be its ``--normalize``) is refused. Its other tasks (linear
probe, captioning, ...) do not score pairs and run unchanged. Its ``acc5`` is NaN for datasets
with fewer than five classes.

Examples:
    clipmag-eval-clip-benchmark eval --model_type clipmag --model tiny --pretrained runs/clip/export \
        --dataset wds/digits_retrieval --dataset_root runs/shards/wds/{dataset} --task zeroshot_retrieval
    clipmag-eval-clip-benchmark eval --model_type clipmag --model tiny --pretrained runs/clip/export \
        --dataset wds/digits_classification --dataset_root runs/shards/wds/{dataset} --num_workers 0 --no_amp \
        --norm dnorm

CLIP-benchmark picks a loader from ``clip_benchmark.models.TYPE2FUNC`` by ``--model_type`` (the
argparse choices come from ``MODEL_TYPES``); ``register()`` adds ours to both.

Result files: CLIP-benchmark names them by its ``--output`` template, with ``{pretrained}`` the
file name of a checkpoint (two ``.../checkpoints/best.pt`` would share it) and the whole path of a
folder (slashes and all). For every ``--pretrained`` that is a path, ``{pretrained}`` becomes its
run's label (:func:`clipmag.storage.naming.model_label`: ``.../qnorm/seed0/export`` ->
``qnorm-seed0``), with parent folders where two share one (``a_qnorm-seed0``, ``b_qnorm-seed0``),
and ``{pretrained_full_path}`` the path with ``_`` for ``/``; a template that names no pretrained
while several are given is refused before anything runs, since every result would land in one file.
"""

from __future__ import annotations

import argparse
import copy
import inspect
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from clipmag.config.entry import run_entry_point
from clipmag.errors import ConfigError
from clipmag.scoring.head_config import HEAD_NAMES, OWN_HEAD
from clipmag.storage.naming import distinct_labels, model_label, slug

MODEL_TYPE = "clipmag"
HEAD_CHOICES = (OWN_HEAD, "cosine")  # what ``--head`` takes; ``--norm`` / ``head.name`` take any head
HEAD_USAGE = (
    "clipmag: CLIP-benchmark's zero-shot classification and retrieval are scored with the model's head record "
    "(--head model, the default; in its trained roles; a class embedding is its prompts' mean direction times "
    "their mean norm), or with the head --norm NAME (or head.name=NAME) names, as in every clipmag tool; "
    "--head cosine is --norm cosine. Every other option is CLIP-benchmark's, written in full."
)


def load_for_benchmark(
    model_name: str, pretrained: str, cache_dir: str | None = None, device: Any = "cpu"
) -> tuple[Any, Any, Any]:
    """CLIP-benchmark's loader contract: (model with encode_image/encode_text, transform, tokenizer).
    The model is ours, head included: its raw features are what open_clip's towers give."""
    from ..model.loading import load_clipmag

    model, transform, tokenizer = load_clipmag(pretrained, device=device)
    return model.to(device).eval(), transform, tokenizer


def register() -> None:
    """Add the ``clipmag`` model type to CLIP-benchmark's registry (idempotent)."""
    import clip_benchmark.models as cb_models

    cb_models.TYPE2FUNC[MODEL_TYPE] = load_for_benchmark
    if MODEL_TYPE not in cb_models.MODEL_TYPES:
        cb_models.MODEL_TYPES.append(MODEL_TYPE)


OWN_FLAGS_AT = (
    "CLIP-benchmark's own flags, and the values a command line resolves to: "
    "clipmag-eval-clip-benchmark eval --help (after any other arguments; it loads CLIP-benchmark and torch)"
)

# Our words in a CLIP-benchmark command line: the flags, and the key a ``key=value`` word sets.
HEAD_FLAGS = ("--head", "--norm")
HEAD_KEY = "head.name"


def _head_word(flag: str, value: str) -> str:
    """The head one of our words names: ``model`` (the model's own) or a head's name."""
    choices = HEAD_CHOICES if flag == "--head" else (*HEAD_NAMES, OWN_HEAD)
    if value not in choices:
        raise ConfigError(f"command line: {flag} takes {' or '.join(choices)}, got {value!r}")
    return value


def split_head_flag(argv: Sequence[str]) -> tuple[str, list[str]]:
    """Our head words out of ``argv``: (head, CLIP-benchmark's arguments). ``--norm NAME`` and
    ``head.name=NAME`` score with head NAME, as in every other clipmag tool; ``--head cosine`` is
    ``--norm cosine`` and ``--head model`` (the default) the model's own head. Two words naming
    different heads are refused."""
    named: dict[str, str] = {}
    rest, words = [], iter(argv)
    for word in words:
        flag, has_inline, inline = word.partition("=")
        if flag in HEAD_FLAGS:
            value = inline if has_inline else next(words, "")
        elif flag == HEAD_KEY:
            value = inline
        else:
            rest.append(word)
            continue
        named[flag] = _head_word(flag, value)
    heads = set(named.values())
    if len(heads) > 1:
        given = ", ".join(f"{flag}{'=' if flag == HEAD_KEY else ' '}{value}" for flag, value in named.items())
        raise ConfigError(f"command line: {given} name different heads; give one")
    return (heads.pop() if heads else OWN_HEAD), rest


def refuse_abbreviations(parser: argparse.ArgumentParser, words: Sequence[str]) -> None:
    """Refuse a flag that is not one of ``parser``'s (or its sub-commands') but begins one: argparse
    would read it as that flag (``--norm`` as ``--normalize``), and a flag the user meant for another
    tool would change a setting without a word."""
    options = _option_strings(parser)
    for word in words:
        flag = word.partition("=")[0]
        if not flag.startswith("--") or flag in options:
            continue
        longer = sorted(option for option in options if option.startswith(flag))
        if longer:
            raise ConfigError(
                f"command line: {flag} is not a flag of CLIP-benchmark, which would read it as {longer[0]}; "
                "write its flags in full (clipmag's head flags: --norm NAME, head.name=NAME, --head model|cosine)"
            )


def _option_strings(parser: argparse.ArgumentParser) -> set[str]:
    """Every option string of ``parser`` and of its sub-commands' parsers."""
    options = set(parser._option_string_actions)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                options |= _option_strings(sub)
    return options


def output_templates(pretrained: Sequence[str], template: str) -> list[str]:
    """``template`` for each of ``pretrained``, with a path's ``{pretrained}`` and
    ``{pretrained_full_path}`` filled in so that no two results share a file (see the module docstring)."""
    values = list(dict.fromkeys(pretrained))
    if len(values) > 1 and "{pretrained" not in template:
        raise ConfigError(
            f"--output {template} names no {{pretrained}}: the results of --pretrained {values[0]} and {values[1]} "
            "would overwrite each other; put {pretrained} in the template"
        )
    labels = distinct_labels([model_label(p) if Path(p).exists() else p for p in pretrained], pretrained)
    return [
        template.replace("{pretrained}", slug(label)).replace("{pretrained_full_path}", value.replace("/", "_"))
        if Path(value).exists()
        else template
        for value, label in zip(pretrained, labels)
    ]


def run_cli(argv: Sequence[str]) -> None:
    """Run ``clip_benchmark`` with ``argv`` (as after the program name), ``clipmag`` models allowed and
    zero-shot tasks scored with the head our words name; an evaluation of several ``--pretrained`` runs one of them
    at a time, each to its own files."""
    head, rest = split_head_flag(argv)
    register()
    import torch
    from clip_benchmark import cli

    from .benchmark_scoring import head_aware

    saved = sys.argv
    sys.argv = ["clip_benchmark", *rest]
    try:
        parser, base = cli.get_parser_args()
    finally:
        sys.argv = saved
    refuse_abbreviations(parser, rest)
    if not hasattr(base, "which"):
        parser.print_help()
        return
    if base.which != "eval":
        cli.main_build(base)
        return
    runs = [base]
    if not base.pretrained_model:  # a model collection names open_clip's own tags, never two alike
        outputs = output_templates(base.pretrained, base.output)
        runs = [copy.copy(base) for _ in base.pretrained]
        for run, pretrained, output in zip(runs, base.pretrained, outputs):
            run.pretrained, run.output = [pretrained], output
    print(f"clipmag: zero-shot tasks scored with the head {head}", flush=True)
    with torch.no_grad(), head_aware(cli, head):
        for run in runs:
            cli.main_eval(run)


def benchmark_values(argv: Sequence[str]) -> dict[str, Any]:
    """The values CLIP-benchmark would run ``argv`` with (its sub-command ``eval`` when none is given)."""
    head, rest = split_head_flag(argv)
    register()
    from clip_benchmark import cli

    saved = sys.argv
    sys.argv = ["clip_benchmark", *(rest if rest and rest[0] in ("eval", "build") else ["eval", *rest])]
    try:
        parser, values = cli.get_parser_args()
    finally:
        sys.argv = saved
    refuse_abbreviations(parser, rest)
    return {"head": head, **vars(values)}


def main(argv: Sequence[str]) -> None:
    """CLIP-benchmark's CLI with our model type. ``--help`` alone prints what the command does, our
    head flags and the head they resolve to, and says where CLIP-benchmark's own flags are listed,
    without loading CLIP-benchmark (whose command line imports torch and open_clip: seconds before a
    word is printed). ``--help`` after other arguments (``eval --help``, say) prints the values all
    of them resolve to and CLIP-benchmark's own help, which need its parser."""
    if "-h" in argv or "--help" in argv:
        print(inspect.cleandoc(__doc__ or ""), "", HEAD_USAGE, "", "values (this command runs with):", sep="\n")
        words = [word for word in argv if word not in ("-h", "--help")]
        values = benchmark_values(words) if words else {"head": split_head_flag(words)[0]}
        print(*(f"  {key} = {value!r}" for key, value in values.items()), "", sep="\n", flush=True)
        if not words:
            print(OWN_FLAGS_AT, flush=True)
            raise SystemExit(0)  # as a --help of argparse ends
    run_cli(argv)


def entry() -> None:
    """Console script ``clipmag-eval-clip-benchmark``: CLIP-benchmark's CLI with our model type and
    head-aware zero-shot scoring; a model it cannot load (a missing file, one refused as unsafe)
    ends in one line naming it."""
    run_entry_point(main)
