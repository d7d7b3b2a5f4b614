"""Train the toy task with the generic loop; runs as one process or under torchrun.

usage: engine_worker.py OUTPUT_DIR LOCAL_BATCH [key=value ...]  (keys of ToyConfig)
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from toy_task import ToyTask  # noqa: E402

from clipmag.config.build import build_config  # noqa: E402
from clipmag.runtime import distributed as dist_utils  # noqa: E402
from clipmag.scoring.head_config import HeadConfig  # noqa: E402
from clipmag.scoring.heads import build_head  # noqa: E402
from clipmag.scoring.loss_config import LossConfig, resolve_loss  # noqa: E402
from clipmag.scoring.losses import loss_from_config  # noqa: E402
from clipmag.train.engine import train  # noqa: E402
from clipmag.train.loop_config import TrainLoopConfig  # noqa: E402
from clipmag.train.optim_config import OptimConfig  # noqa: E402


@dataclass
class ToyConfig:
    head: HeadConfig = field(default_factory=lambda: HeadConfig(name="learnable"))
    loss: LossConfig = field(default_factory=LossConfig)
    optim: OptimConfig = field(default_factory=lambda: OptimConfig(lr=1e-2, gamma_lr=5e-2))
    train: TrainLoopConfig = field(
        default_factory=lambda: TrainLoopConfig(
            steps=8,
            log_every=1,
            save_every=4,
            eval_every=4,
            progress=False,
            tensorboard=False,
            device="cpu",
            precision="fp32",  # the equivalence tests compare against exact fp32 arithmetic
        )
    )
    negatives: int = 1
    fail_at: int | None = None
    nan_gradient_at: int | None = None
    peak_eval: int | None = None
    dropout: float = 0.0
    signal_at: int | None = None
    step_delay_s: float = 0.0


def run(output_dir: str, local_batch: int, overrides: list[str]) -> ToyConfig:
    """Train the toy task into ``output_dir`` with ``local_batch`` rows per rank; the config used."""
    cfg = build_config(ToyConfig, overrides=[f"train.output_dir={output_dir}", *overrides])
    ctx = dist_utils.init_distributed(cfg.train.device, cfg.train.collective_timeout_s / 60)
    head = build_head(cfg.head)
    loss_cfg = dataclasses.replace(cfg.loss, direction="q2d" if cfg.loss.direction == "auto" else cfg.loss.direction)
    cfg = dataclasses.replace(cfg, loss=resolve_loss(loss_cfg, infonce_scale=20.0))  # as a front end resolves it
    task = ToyTask(
        head,
        loss_from_config(cfg.loss),
        local_batch,
        cfg.train.seed,
        cfg.negatives,
        cfg.fail_at,
        cfg.nan_gradient_at,
        cfg.peak_eval,
        cfg.dropout,
        cfg.signal_at,
        cfg.step_delay_s,
    )
    try:
        train(task, cfg.train, cfg.optim, cfg, ctx)
    finally:
        dist_utils.cleanup()
    return cfg


if __name__ == "__main__":
    run(sys.argv[1], int(sys.argv[2]), sys.argv[3:])
