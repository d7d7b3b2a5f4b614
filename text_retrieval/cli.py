"""Command line of the text trainer: parse the config, then the core run driver does the rest."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from clipmag.config.command_line import parse_cli
from clipmag.config.entry import run_entry_point
from clipmag.registry.config_packages import config_path
from clipmag.train.cost import CellCost
from clipmag.train.run import run_training
from text_retrieval.config import TEXT_SHORTHANDS, TextConfig, resolve_text_config
from text_retrieval.cost import text_cell_cost
from text_retrieval.task import TextRetrievalTask

DEFAULT_CONFIG = "configs/text/default.yaml"


def parse_args(argv: Sequence[str]) -> TextConfig:
    """``[--config YAML] [--flag value ...] [key=value ...]`` on top of the packaged default config."""
    return resolve_text_config(parse_cli(TextConfig, argv, TEXT_SHORTHANDS, default_config=config_path(DEFAULT_CONFIG)))


def cell_cost(argv: Sequence[str], world_size: int) -> CellCost:
    """What one run of ``argv`` on ``world_size`` ranks costs (``clipmag-sweep plan``)."""
    return text_cell_cost(parse_args(argv), world_size)


def main(argv: Sequence[str]) -> dict[str, Any]:
    """Train, test the export and write ``results.json``; returns the results record (rank 0)."""
    return run_training(parse_args(argv), TextRetrievalTask)


def entry() -> None:
    """Console script ``clipmag-train-text``."""
    run_entry_point(main)


if __name__ == "__main__":  # torchrun -m text_retrieval.cli
    entry()
