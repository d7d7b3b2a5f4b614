"""Fine-tune a text encoder for dense retrieval (or STS) under a similarity head: cosine, dot, qnorm,
dnorm or learnable. The run trains with InfoNCE on in-batch (and hard) negatives, validates and
checkpoints as it goes, exports the model with its head, tests the export and writes
``results.json`` into the output folder. Without arguments it is the bundled default (the
config's defaults: MiniLM on Python stdlib code search, about a minute on two CPU cores);
``--config FILE`` changes the keys the file holds and flags or ``key=value`` the keys they
name, so a file or flag that sets the head changes the head and nothing else.

Examples:
    clipmag-train-text --norm qnorm --output runs/text/qnorm
    clipmag-train-text --config configs/text/sts.yaml --norm dot --seed 1
    torchrun --nproc_per_node=2 -m text_retrieval.cli --norm dnorm --batch-size 64 --lr 1e-4 train.chunk_size=16
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from clipmag.config.command_line import parse_cli
from clipmag.config.entry import run_entry_point
from text_retrieval.config import TEXT_SHORTHANDS, TextConfig, resolve_text_config

if TYPE_CHECKING:
    from clipmag.train.cost import CellCost


def parse_args(argv: Sequence[str]) -> TextConfig:
    """``[--config YAML] [--flag value ...] [key=value ...]``, each layer over the config's defaults,
    resolved and checked."""
    return parse_cli(TextConfig, argv, TEXT_SHORTHANDS, description=__doc__, resolve=resolve_text_config)


def cell_cost(argv: Sequence[str], world_size: int) -> CellCost:
    """What one run of ``argv`` on ``world_size`` ranks costs (``clipmag-sweep plan``)."""
    from text_retrieval.cost import text_cell_cost  # torch and the encoder: only once a cost is asked for

    return text_cell_cost(parse_args(argv), world_size)


def main(argv: Sequence[str]) -> dict[str, Any]:
    """Train, test the export and write ``results.json``; returns the results record (rank 0)."""
    cfg = parse_args(argv)  # --help ends here, before torch and the trainer are imported
    from clipmag.train.run import run_training
    from text_retrieval.task import TextRetrievalTask

    return run_training(cfg, TextRetrievalTask)


def entry() -> None:
    """Console script ``clipmag-train-text``."""
    run_entry_point(main)


if __name__ == "__main__":  # torchrun -m text_retrieval.cli
    entry()
