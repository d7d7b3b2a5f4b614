"""The front end's config: the core's shared sections, its own ``model`` and ``data``, its flags,
and ``resolve``, which fills what ``auto`` leaves open before anything is built."""

from __future__ import annotations

import dataclasses
import importlib.util
from dataclasses import dataclass, field

from clipmag.config.checks import PositiveInt
from clipmag.errors import ConfigError
from clipmag.scoring.head_config import HeadConfig
from clipmag.scoring.loss_config import LossConfig, resolve_loss
from clipmag.train.loop_config import TrainLoopConfig
from clipmag.train.optim_config import OptimConfig
from clipmag.train.trainer_flags import in_batch_problem, trainer_flags

INFONCE_SCALE = 20.0  # the paper's starting scale for every head
# No choice of model, start or objective and no data splits to name: the other shared flags and --dim.
FLAGS = trainer_flags(without=("model", "init", "objective", "train", "validation", "test"), dim="model.dim")


@dataclass
class BagModelConfig:
    """Each tower: ``buckets`` hashed word embeddings of ``dim`` values, averaged over a text's first
    ``max_words`` words."""

    buckets: PositiveInt = 4096
    dim: PositiveInt = 32
    max_words: PositiveInt = 24


@dataclass
class BagDataConfig:
    """Pairs from the public functions of ``modules``; ``batch_size`` pairs per rank and step."""

    batch_size: PositiveInt = 32
    modules: list[str] = field(
        default_factory=lambda: [
            *("os", "posixpath", "shutil", "tempfile", "inspect", "typing", "dataclasses", "functools"),
            *("statistics", "difflib", "base64", "urllib.parse", "email.utils"),
        ]
    )


@dataclass
class BagConfig:
    head: HeadConfig = field(default_factory=HeadConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    optim: OptimConfig = field(default_factory=lambda: OptimConfig(lr=1e-2))
    train: TrainLoopConfig = field(
        default_factory=lambda: TrainLoopConfig(output_dir="runs/bag_of_words", steps=60, eval_every=20)
    )
    model: BagModelConfig = field(default_factory=BagModelConfig)
    data: BagDataConfig = field(default_factory=BagDataConfig)


def resolve(cfg: BagConfig) -> BagConfig:
    """The loss direction (``auto``: queries to documents) and starting scale; one ``ConfigError``
    listing every problem."""
    problems = [f"data.modules: no module {name!r} to import" for name in cfg.data.modules if not _importable(name)]
    if problem := in_batch_problem(cfg.data.batch_size):
        problems.append(problem)
    if problems:
        raise ConfigError("; ".join(problems))
    direction = "q2d" if cfg.loss.direction == "auto" else cfg.loss.direction
    loss = resolve_loss(dataclasses.replace(cfg.loss, direction=direction), infonce_scale=INFONCE_SCALE)
    return dataclasses.replace(cfg, loss=loss)


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a parent that is not a package, or an empty name
        return False
