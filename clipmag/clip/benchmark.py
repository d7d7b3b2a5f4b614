"""CLIP-benchmark on clipmag checkpoints: a ``clipmag`` model type for its real command line, whose
zero-shot tasks are scored with the model's head.

CLIP-benchmark picks a loader from ``clip_benchmark.models.TYPE2FUNC`` by ``--model_type`` (the
argparse choices come from ``MODEL_TYPES``). ``register()`` adds ours to both, with
``--pretrained`` naming one of our export folders, run folders or checkpoints and ``--model`` only
a label in the output file name.

CLIP-benchmark itself L2-normalises both towers' features, so its numbers are cosine whatever head
the model was trained with. ``--head model`` (the default) scores zero-shot classification and
retrieval with the model's head record instead, ``--head cosine`` with cosine; both through
:mod:`clipmag.clip.benchmark_scoring`, everything else (datasets, templates, metrics, the JSON
file) CLIP-benchmark's own. Its other tasks (linear probe, captioning, ...) do not score pairs and
run unchanged. Its ``acc5`` is NaN for datasets with fewer than five classes.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import torch

from clipmag.config.checks import ConfigError
from clipmag.config.entry import run_entry_point

from .benchmark_scoring import HEAD_CHOICES, head_aware

MODEL_TYPE = "clipmag"
HEAD_USAGE = (
    "clipmag: --head model|cosine (default model) scores CLIP-benchmark's zero-shot classification and "
    "retrieval with the model's head record (in its trained roles; a class embedding is its prompts' mean "
    "direction times their mean norm) or with cosine; every other option is CLIP-benchmark's."
)


def load_for_benchmark(
    model_name: str, pretrained: str, cache_dir: str | None = None, device: Any = "cpu"
) -> tuple[Any, Any, Any]:
    """CLIP-benchmark's loader contract: (model with encode_image/encode_text, transform, tokenizer).
    The model is ours, head included: its raw features are what open_clip's towers give."""
    from .model import load_clipmag

    model, transform, tokenizer = load_clipmag(pretrained, device=device)
    return model.to(device).eval(), transform, tokenizer


def register() -> None:
    """Add the ``clipmag`` model type to CLIP-benchmark's registry (idempotent)."""
    import clip_benchmark.models as cb_models

    cb_models.TYPE2FUNC[MODEL_TYPE] = load_for_benchmark
    if MODEL_TYPE not in cb_models.MODEL_TYPES:
        cb_models.MODEL_TYPES.append(MODEL_TYPE)


def split_head_flag(argv: Sequence[str]) -> tuple[str, list[str]]:
    """Our ``--head VALUE`` (or ``--head=VALUE``) out of ``argv``: (head, CLIP-benchmark's arguments)."""
    head, rest, words = "model", [], iter(argv)
    for word in words:
        if word == "--head":
            head = next(words, "")
        elif word.startswith("--head="):
            head = word.partition("=")[2]
        else:
            rest.append(word)
            continue
        if head not in HEAD_CHOICES:
            raise ConfigError(f"command line: --head takes {' or '.join(HEAD_CHOICES)}, got {head!r}")
    return head, rest


def run_cli(argv: Sequence[str]) -> None:
    """Run ``clip_benchmark`` with ``argv`` (as after the program name), ``clipmag`` models allowed and
    zero-shot tasks scored with ``--head``."""
    head, rest = split_head_flag(argv)
    register()
    from clip_benchmark import cli

    asks_help = bool({"-h", "--help"} & set(rest))
    print(HEAD_USAGE if asks_help else f"clipmag: zero-shot tasks scored with --head {head}")
    if rest in (["-h"], ["--help"]):  # its eval command's options, where --head applies ("build --help": the other)
        rest = ["eval", "--help"]
    saved = sys.argv
    sys.argv = ["clip_benchmark", *rest]
    try:
        with torch.no_grad(), head_aware(cli, head):
            cli.main()
    finally:
        sys.argv = saved


def entry() -> None:
    """Console script ``clipmag-eval-clip-benchmark``: CLIP-benchmark's CLI with our model type and
    head-aware zero-shot scoring; a model it cannot load (a missing file, one refused as unsafe)
    ends in one line naming it."""
    run_entry_point(run_cli)
