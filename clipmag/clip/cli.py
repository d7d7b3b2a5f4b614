"""Command-line entry of the image-text trainer (``scripts/train_clip.py``, sweeps in-process).

``main(argv)`` parses ``[--config YAML] [--flag value ...] [key=value ...]`` into a checked
``ClipConfig`` and trains; under torchrun every rank calls it. Returns the final metrics.
"""

from __future__ import annotations

from typing import Sequence

from .task import parse_args, run


def main(argv: Sequence[str]) -> dict[str, float]:
    return run(parse_args(argv))
