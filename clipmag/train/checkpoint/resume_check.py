"""Whether a checkpoint may be continued by this run: same model, same head, same kind of step.

Resuming restores the weights, the optimizer and the schedule and trains on, so the checkpoint of
a different run either fails deep inside ``load_state_dict`` or, worse, trains on silently (a
cosine checkpoint continued with a dnorm head reports dnorm numbers for a mixed run). Every
checkpoint stores its run's *step identity* - the settings that decide what one optimizer step
computes - and a resume compares it, and the shapes of the weights, with the new run before
anything is written; a difference is one error naming each key with both values. A checkpoint
written before a setting existed ran with what it now switches off (:mod:`clipmag.train.checkpoint.predating`):
it is compared as it ran, and a resume of it takes that value (:func:`resumed_loop`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from clipmag.config.spellings import renamed_value
from clipmag.runtime.logs import logger
from clipmag.scoring.heads import build_head
from clipmag.train.checkpoint import files as ckpt_io
from clipmag.train.checkpoint.predating import NEW_RUN_VALUES, PREDATING_VALUES, with_predating_values
from clipmag.train.loop_config import TrainLoopConfig

STEP_SECTIONS = ("loss", "optim")  # every key of these changes what a step computes
STEP_LOOP_KEYS = ("seed", "grad_accum", "steps", "fast_dropout")  # fast_dropout: which masks dropout draws
STEP_MODEL_KEYS = ("dropout",)  # both front ends' model.dropout: whether a step draws dropout masks
ROWS_KEY = "data.batch_size x ranks"  # the rows (and in-batch negatives) of one micro-batch


class ResumeMismatch(ValueError):
    """The checkpoint to resume belongs to a run with other settings or another model."""


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def config_identity(config: Mapping[str, Any]) -> dict[str, Any]:
    """The settings of a saved config (``to_dict`` of a run's config) that decide what a step
    computes, as ``section.key`` -> value: the head's form (name, and the starting gammas of a head
    that has them), the loss, the optimizer and schedule, the seed (data order), accumulation, the
    model's dropout and, unless the schedule is constant, the number of steps (the schedule's length)."""
    identity: dict[str, Any] = {}
    head = config.get("head") or {}
    if "name" in head:
        form = build_head(str(head["name"])).to_dict()
        identity.update({f"head.{k}": _plain(head[k]) for k in form if k in head})
    for section in STEP_SECTIONS:
        identity.update({f"{section}.{k}": _plain(v) for k, v in (config.get(section) or {}).items()})
    train = config.get("train") or {}
    identity.update({f"train.{k}": train[k] for k in STEP_LOOP_KEYS if k in train})
    model = config.get("model") or {}
    identity.update({f"model.{k}": model[k] for k in STEP_MODEL_KEYS if k in model})
    if identity.get("optim.schedule") == "constant":
        identity.pop("train.steps", None)
    return identity


def _recorded_identity(ckpt: Mapping[str, Any]) -> dict[str, Any]:
    """The step identity checkpoint ``ckpt`` stored, or its saved config's (written before identities)."""
    return dict(ckpt.get("identity") or config_identity(ckpt.get("config") or {}))


def resumed_loop(loop: TrainLoopConfig) -> tuple[TrainLoopConfig, dict[str, Any] | None]:
    """``loop`` with each ``train`` setting of :data:`~clipmag.train.checkpoint.predating.PREDATING_VALUES` that
    the user left unset decided: a new run takes the setting's default, a resume the value its
    checkpoint ran with - torch's dropout for a run from before ``train.fast_dropout`` - so resuming,
    or continuing in a sweep, an old run trains on as it ran. A value the user set is kept, and the
    resume check refuses it when the checkpoint ran otherwise. Read before the model is built, which
    the setting shapes; returns the checkpoint too when it was read (None otherwise), so the trainer
    does not read it again."""
    unset = [k.removeprefix("train.") for k in PREDATING_VALUES if k.startswith("train.")]
    unset = [name for name in unset if getattr(loop, name) is None]
    if not unset:
        return loop, None
    path = ckpt_io.resolve_resume(loop.resume, loop.output_dir)
    if path is None:
        return dataclasses.replace(loop, **{name: NEW_RUN_VALUES[f"train.{name}"] for name in unset}), None
    ckpt = ckpt_io.load_checkpoint(path)
    recorded = with_predating_values(_recorded_identity(ckpt))
    changes = {name: recorded[f"train.{name}"] for name in unset}
    for name, value in changes.items():
        logger.info("%s ran with train.%s=%s: the resumed run keeps it", path, name, json.dumps(value))
    return dataclasses.replace(loop, **changes), ckpt


def step_identity(
    config: Mapping[str, Any], rows: int, amp_dtype: torch.dtype | None, run: Mapping[str, Any]
) -> dict[str, Any]:
    """``config_identity`` plus what only the running trainer knows: the rows of a micro-batch over
    all ranks, the precision ``auto`` resolved to, and the front end's run identity (model, objective)."""
    precision = str(amp_dtype).removeprefix("torch.") if amp_dtype is not None else "fp32"
    return {**config_identity(config), ROWS_KEY: rows, "train.precision": precision, **run}


def _shape_problems(saved: Mapping[str, torch.Tensor], current: Mapping[str, torch.Tensor]) -> list[str]:
    """How the checkpoint's weights differ in name or shape from this run's model (empty: they fit)."""
    problems = []
    lacking, extra = sorted(set(current) - set(saved)), sorted(set(saved) - set(current))
    if lacking:
        problems.append(f"the checkpoint lacks {len(lacking)} of this model's weights (e.g. {lacking[0]})")
    if extra:
        problems.append(f"the checkpoint has {len(extra)} weights this model lacks (e.g. {extra[0]})")
    for key in sorted(set(saved) & set(current)):
        if tuple(saved[key].shape) != tuple(current[key].shape):
            problems.append(
                f"weight {key} has shape {list(saved[key].shape)} there and {list(current[key].shape)} here"
            )
            break
    return problems


def check_resumable(
    ckpt: Mapping[str, Any],
    path: str | Path,
    identity: Mapping[str, Any],
    state: Mapping[str, torch.Tensor],
    config_class: type | None = None,
) -> None:
    """Raise ``ResumeMismatch`` unless checkpoint ``ckpt`` (read from ``path``) can be continued by
    a run with step identity ``identity`` and model weights ``state``.

    A checkpoint written before the step identity was stored is compared on what its saved
    config holds, one written before a setting existed as it ran (``train.fast_dropout`` false);
    other keys that only one side knows are not compared, and one that records no settings at all
    is compared on its weights. A value the run's ``config_class`` has renamed since
    (``RENAMED_VALUES``: ``objective=infonce`` is ``retrieval`` now) is compared in its new spelling.
    """
    saved = _recorded_identity(ckpt)
    saved = with_predating_values(saved) if saved else saved
    if config_class is not None:
        saved = {key: renamed_value(config_class, key, value, str(path)) for key, value in saved.items()}
    problems = [
        f"{key} is {saved[key]!r} there and {identity[key]!r} here"
        for key in identity
        if key in saved and _plain(saved[key]) != _plain(identity[key])
    ]
    if not problems:
        problems = _shape_problems(ckpt["state_dict"], state)
    if problems == [f"train.steps is {saved.get('train.steps')!r} there and {identity.get('train.steps')!r} here"]:
        raise ResumeMismatch(_extend_advice(Path(path), saved, identity))
    if problems:
        raise ResumeMismatch(
            f"cannot resume from {path}: it belongs to another run ({'; '.join(problems)}); resume with the "
            "checkpoint's settings, or start the new run in another train.output_dir (or drop --resume and add "
            "--overwrite to replace the old run)"
        )


def _extend_advice(path: Path, saved: Mapping[str, Any], identity: Mapping[str, Any]) -> str:
    """Only the step count differs: the user wants a longer run. Its learning-rate schedule was
    planned for the old count, so continuing would change every later step; say what does work."""
    run = path.parent.parent
    return (
        f"cannot extend the run in {run} from {saved['train.steps']} to {identity['train.steps']} steps: its "
        f"{saved.get('optim.schedule', '?')} schedule was planned for {saved['train.steps']} steps, so every later "
        "step's learning rate would differ from the run it claims to continue. To train longer, either start a new "
        f"run from its weights (--model {run / 'export'} train.steps=N --output NEW_FOLDER), or plan extendable "
        "runs with optim.schedule=constant, whose step count a resume may raise"
    )
