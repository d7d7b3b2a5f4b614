"""Train an open_clip image-text model under a similarity head (cosine, dot, qnorm, dnorm or
learnable) with the objective ``sym`` (both softmax axes), ``i2t`` (the image is the query) or
``t2i`` (the text is). The run validates and checkpoints as it goes, exports the model with its
head, tests the export on retrieval in both directions and writes ``results.json`` into the output
folder. Without arguments it is the bundled default (composite digits with ``clipmag-tiny``, a
few minutes on two CPU cores); ``--config FILE`` changes the keys the file holds and flags or
``key=value`` the keys they name. Under torchrun every rank runs the same command.

Examples:
    clipmag-train-clip --norm qnorm --objective i2t --output runs/clip/i2t_qnorm
    clipmag-train-clip --config configs/clip/coco.yaml --resume latest
    torchrun --nproc_per_node=2 -m image_text.cli --norm dnorm --batch-size 128
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from clipmag.config.command_line import parse_cli
from clipmag.config.entry import run_entry_point

from .config import SHORTHANDS, ClipConfig, resolve

if TYPE_CHECKING:
    from clipmag.train.cost import CellCost


def parse_args(argv: Sequence[str]) -> ClipConfig:
    """``[--config YAML] [--flag value ...] [key=value ...]``, each layer over the defaults, resolved
    and checked."""
    return parse_cli(ClipConfig, argv, SHORTHANDS, description=__doc__, resolve=resolve)


def cell_cost(argv: Sequence[str], world_size: int) -> CellCost:
    """What one run of ``argv`` on ``world_size`` ranks costs (``clipmag-sweep plan``)."""
    from .cost import clip_cell_cost  # open_clip and torch: only once a cost is asked for

    return clip_cell_cost(parse_args(argv), world_size)


def main(argv: Sequence[str]) -> dict[str, Any]:
    """Train, test the export and write ``results.json``; returns the results record (rank 0)."""
    cfg = parse_args(argv)  # --help ends here, before torch and open_clip are imported
    from clipmag.train.run import run_training

    from .task import ClipTask

    return run_training(cfg, ClipTask)


def entry() -> None:
    """Console script ``clipmag-train-clip``."""
    run_entry_point(main)


if __name__ == "__main__":  # torchrun -m image_text.cli
    entry()
