"""CLIP-benchmark on clipmag checkpoints: a ``clipmag`` model type for its real command line.

CLIP-benchmark picks a loader from ``clip_benchmark.models.TYPE2FUNC`` by ``--model_type`` (the
argparse choices come from ``MODEL_TYPES``). ``register()`` adds ours to both, so its own CLI,
datasets and metrics run unchanged, with ``--pretrained`` naming one of our export folders or
checkpoints and ``--model`` only a label in the output file name.

Its numbers are cosine by construction: CLIP-benchmark L2-normalises both towers' features before
scoring, whatever head the model was trained with. Head-aware numbers come from
``clipmag.clip.evaluate``. Its ``acc5`` is NaN for datasets with fewer than five classes.
"""

from __future__ import annotations

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


def entry() -> None:
    """Console script ``clipmag-eval-clip-benchmark``: CLIP-benchmark's CLI with our model type; a
    model it cannot load (a missing file, one refused as unsafe) ends in one line naming it."""
    run_entry_point(run_cli)
