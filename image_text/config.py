"""The image-text trainer's configuration: plain data sections and their resolution.

``ClipConfig`` is the whole run: the objective (``i2t``, ``t2i`` or ``sym``), the open_clip
architecture, the data, and the shared head / loss / optimizer / loop sections. Its defaults are
the bundled run (composite digits, ``clipmag-tiny``), sized to train in a few minutes on two CPU
cores, so ``python scripts/train_clip.py`` with no arguments is a complete experiment.

Objective -> roles (docs/method.md section 5): ``i2t`` makes the image the query and ranks texts
(InfoNCE ``q2d``); ``t2i`` makes the text the query; ``sym`` averages both softmax axes
(``both``) with ``model.query_side`` as the query (image unless set). ``loss.direction`` and
``model.query_side`` default to ``auto`` and are derived from the objective by ``resolve``; a
value that contradicts the objective is an error. The resolved values are what is saved. Under
``loss.kind=siglip`` (``--siglip``) the objective only fixes the query side: the sigmoid loss has no
softmax axis.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from clipmag.config.spellings import BUNDLED_RENAME, TRAINER_FLAGS, TRAINER_KEYS
from clipmag.errors import ConfigError
from clipmag.scoring.head_config import HeadConfig
from clipmag.scoring.loss_config import LossConfig, resolve_loss
from clipmag.train.loop_config import TrainLoopConfig
from clipmag.train.optim_config import OptimConfig
from clipmag.train.trainer_flags import in_batch_problem, trainer_flags

from .data.config import BUNDLED, ClipDataConfig, split_overlap
from .model.config import RANDOM_INIT, ClipModelConfig, is_our_architecture, lock_problems

Objective = Literal["sym", "i2t", "t2i"]
# The trainers' shared flags (clipmag.train.trainer_flags) and this trainer's own: the query tower
# and the locks (frozen towers as in LiT).
SHORTHANDS = trainer_flags(
    query_side="model.query_side",
    lock_image="model.lock_image",
    lock_text="model.lock_text",
)
DIRECTION = {"sym": "both", "i2t": "q2d", "t2i": "q2d"}
CLIP_INFONCE_SCALE = 1 / 0.07  # open_clip's start
QUERY_SIDE = {"i2t": "image", "t2i": "text"}


@dataclass
class ClipConfig:
    """One image-text run. Defaults: the bundled digits set, symmetric loss, cosine head."""

    objective: Objective = "sym"
    model: ClipModelConfig = field(default_factory=ClipModelConfig)
    data: ClipDataConfig = field(default_factory=ClipDataConfig)
    head: HeadConfig = field(default_factory=HeadConfig)
    # open_clip's logit scale: learnable, clamped at 100, initialised at 1/0.07 (SigLIP: 10, bias -10).
    loss: LossConfig = field(default_factory=lambda: LossConfig(learnable_scale=True, max_scale=100.0))
    optim: OptimConfig = field(
        default_factory=lambda: OptimConfig(lr=2e-3, weight_decay=0.1, eps=1e-6, warmup_steps=30, gamma_lr=1e-2)
    )
    train: TrainLoopConfig = field(
        default_factory=lambda: TrainLoopConfig(output_dir="runs/clip", steps=400, log_every=50, save_every=200)
    )

    RENAMED_KEYS: ClassVar[dict[str, str]] = {
        "data.embedded": "data.bundled",
        "data.embedded_seed": "data.bundled.seed",
        **TRAINER_KEYS,
    }
    RENAMED_FLAGS: ClassVar[dict[str, str]] = TRAINER_FLAGS
    LISTED_KEYS: ClassVar[tuple[str, ...]] = ("data.validation", "data.test")  # one shard set each, before
    RENAMED_VALUES: ClassVar[dict[str, dict[str | None, str]]] = {
        "data.train": {None: BUNDLED, **BUNDLED_RENAME},  # data.train=null was the bundled set
        # model.pretrained=null (in a file; "null" on the command line): random weights, before the rename
        "model.init": {None: RANDOM_INIT, "null": RANDOM_INIT},
    }


def _derived(key: str, given: str, derived: str, objective: str, problems: list[str]) -> str:
    """``derived`` for ``auto``; the given value when it agrees, else a problem naming the key."""
    if given not in ("auto", derived):
        problems.append(
            f"{key}={given} contradicts objective={objective} (which trains {key}={derived}); "
            f"drop {key} or set it to auto"
        )
    return derived


def _data_problems(d: ClipDataConfig) -> list[str]:
    """What is wrong with the data section: bundled training with shards to evaluate on, or shard
    splits that share a shard."""
    given = [k for k in ("validation", "test") if getattr(d, k)]
    if d.is_bundled:
        return [f"data.{k} is set but data.train=bundled, which brings its own splits: drop one" for k in given[:1]]
    overlap = split_overlap({"train": [d.train], **{k: list(getattr(d, k)) for k in given}})
    return [overlap] if overlap else []


def resolve(cfg: ClipConfig) -> ClipConfig:
    """Derive loss direction and query side; reject unusable settings early."""
    problems: list[str] = []
    direction = _derived("loss.direction", cfg.loss.direction, DIRECTION[cfg.objective], cfg.objective, problems)
    side = cfg.model.query_side
    if cfg.objective in QUERY_SIDE:
        side = _derived("model.query_side", side, QUERY_SIDE[cfg.objective], cfg.objective, problems)
    elif side == "auto":
        side = "image"
    try:
        loss = resolve_loss(dataclasses.replace(cfg.loss, direction=direction), infonce_scale=CLIP_INFONCE_SCALE)
    except ConfigError as err:
        problems.append(str(err))
        loss = cfg.loss
    cfg = dataclasses.replace(
        cfg,
        loss=loss,
        model=dataclasses.replace(cfg.model, query_side=side),
    )
    problems += [p for p in [in_batch_problem(cfg.data.batch_size)] if p]
    problems += _data_problems(cfg.data) + lock_problems(cfg.model)
    if not is_our_architecture(cfg.model.name):
        from .model.architecture import resolve_model_name  # open_clip's own names: only open_clip knows them

        try:
            resolve_model_name(cfg.model.name)
        except ValueError as err:
            problems.append(str(err))
    if problems:
        raise ConfigError("; ".join(problems))
    return cfg
