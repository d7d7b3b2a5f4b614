r"""CLIP-benchmark on clipmag checkpoints: runs CLIP-benchmark's own command line (its datasets,
tasks and metrics, unchanged) on an exported clipmag image-text model: ``--model_type clipmag``
with ``--pretrained`` naming one of our export folders or checkpoints (``--model`` is only a label
in the output file name). Its numbers are cosine by construction: CLIP-benchmark L2-normalises
both towers' features before scoring, whatever head the model was trained with; head-aware
numbers come from ``clipmag.clip.evaluate``. Its ``acc5`` is NaN for datasets with fewer than five
classes.

Examples:
    clipmag-eval-clip-benchmark eval --model_type clipmag --model tiny --pretrained runs/clip/export \
        --dataset wds/digits_retrieval --dataset_root runs/shards/wds/{dataset} --task zeroshot_retrieval
    clipmag-eval-clip-benchmark eval --model_type clipmag --model tiny --pretrained runs/clip/export \
        --dataset wds/digits_classification --dataset_root runs/shards/wds/{dataset} --num_workers 0 --no_amp

CLIP-benchmark picks a loader from ``clip_benchmark.models.TYPE2FUNC`` by ``--model_type`` (the
argparse choices come from ``MODEL_TYPES``); ``register()`` adds ours to both.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Sequence
from typing import Any

import torch

from clipmag.config.entry import run_entry_point

MODEL_TYPE = "clipmag"
COSINE_NOTE = (
    "note: CLIP-benchmark L2-normalises image and text features, so these numbers are cosine scores "
    "whatever head the model was trained with; its acc5 is NaN below 5 classes."
)


def load_for_benchmark(
    model_name: str, pretrained: str, cache_dir: str | None = None, device: Any = "cpu"
) -> tuple[Any, Any, Any]:
    """CLIP-benchmark's loader contract: (model with encode_image/encode_text, transform, tokenizer)."""
    from .model import load_clipmag

    model, transform, tokenizer = load_clipmag(pretrained, device=device)
    return model.clip.to(device).eval(), transform, tokenizer


def register() -> None:
    """Add the ``clipmag`` model type to CLIP-benchmark's registry (idempotent)."""
    import clip_benchmark.models as cb_models

    cb_models.TYPE2FUNC[MODEL_TYPE] = load_for_benchmark
    if MODEL_TYPE not in cb_models.MODEL_TYPES:
        cb_models.MODEL_TYPES.append(MODEL_TYPE)


def run_cli(argv: Sequence[str]) -> None:
    """Run ``clip_benchmark`` with ``argv`` (as after the program name), ``clipmag`` models allowed."""
    register()
    from clip_benchmark import cli

    print(COSINE_NOTE, flush=True)
    saved = sys.argv
    sys.argv = ["clip_benchmark", *argv]
    try:
        with torch.no_grad():
            cli.main()
    finally:
        sys.argv = saved
    print(COSINE_NOTE, flush=True)


def benchmark_values(argv: Sequence[str]) -> dict[str, Any]:
    """The values CLIP-benchmark would run ``argv`` with (its sub-command ``eval`` when none is given)."""
    register()
    from clip_benchmark import cli

    saved = sys.argv
    sys.argv = ["clip_benchmark", *(argv if argv and argv[0] in ("eval", "build") else ["eval", *argv])]
    try:
        return vars(cli.get_parser_args()[1])
    finally:
        sys.argv = saved


def main(argv: Sequence[str]) -> None:
    """CLIP-benchmark's CLI with our model type. ``--help`` first prints what the command does and
    the values the other arguments resolve to, then CLIP-benchmark's own help (its sub-commands, or
    with ``eval`` every flag)."""
    if "-h" in argv or "--help" in argv:
        print(inspect.cleandoc(__doc__ or ""), "", "values (this command runs with):", sep="\n")
        words = [word for word in argv if word not in ("-h", "--help")]
        values = benchmark_values(words)
        print(*(f"  {key} = {value!r}" for key, value in values.items()), "", sep="\n", flush=True)
    run_cli(argv)


def entry() -> None:
    """Console script ``clipmag-eval-clip-benchmark``."""
    run_entry_point(main)
