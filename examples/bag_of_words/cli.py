"""Train the bag-of-words toy front end under a similarity head (cosine, dot, qnorm, dnorm or
learnable): two hashed-word towers learn to match the first line of a standard-library function's
docstring to the function's module, name and parameters. The run validates, checkpoints, exports
the model with its head, tests the export on held-out functions and writes ``results.json``.
Seconds on a CPU; the worked example of docs/architecture.md.

Examples:
    python -m examples.bag_of_words.cli --norm qnorm --output runs/bag_of_words/qnorm
    python -m examples.bag_of_words.cli --norm cosine --steps 30 --dim 16 --output runs/bag_of_words/cosine
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from clipmag.config.command_line import parse_cli
from clipmag.config.entry import run_entry_point
from clipmag.train.run import run_training

from .config import FLAGS, BagConfig, resolve
from .task import BagTask


def parse_args(argv: Sequence[str]) -> BagConfig:
    """Parse and check ``argv``, running nothing (a sweep checks every cell before the first trains)."""
    return parse_cli(BagConfig, argv, FLAGS, description=__doc__, resolve=resolve)


def main(argv: Sequence[str]) -> dict[str, Any]:
    return run_training(parse_args(argv), BagTask)  # BagTask(cfg, ctx)


def entry() -> None:
    run_entry_point(main)  # a user error is one "error:" line; `--help | head` ends quietly


if __name__ == "__main__":  # python -m examples.bag_of_words.cli, or under torchrun -m
    entry()
