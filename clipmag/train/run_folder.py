"""Whether a new run may write into its ``train.output_dir``, and what it clears there first.

A folder that holds a run (its checkpoints, ``metrics.jsonl``, ``results.json`` or export) is
never written over by accident: the new run either continues that run (``train.resume``) or
replaces it (``train.overwrite``), which removes the old run's files before anything new is
written, so no file ever mixes two runs. Other files in the folder (notes, a sweep's
``cell.json``) are left alone, and a folder without a run starts as an empty one.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from clipmag.errors import ConfigError
from clipmag.runtime.logs import logger
from clipmag.storage.files import remove_stale_partials
from clipmag.train.checkpoint import BEST, CHECKPOINT_DIR, LATEST
from clipmag.train.loop_config import TrainLoopConfig
from clipmag.train.sharding import STEP_FOLDER_GLOB

# What a run writes into its folder (glob patterns); the first six show that a run is there.
RUN_FILES = (
    f"{CHECKPOINT_DIR}/{LATEST}",
    f"{CHECKPOINT_DIR}/{STEP_FOLDER_GLOB}",
    f"{CHECKPOINT_DIR}/{BEST}",
    "results.json",
    "export",
    "metrics.jsonl",
    "tensorboard",
    "config.yaml",
    "out.log",
)
EVIDENCE = RUN_FILES[:6]
FINISHED = ("results.json", "export")
# What a run killed before its first latest.pt leaves; a resume restarts it and clears them.
PROGRESS_FILES = (f"{CHECKPOINT_DIR}/{BEST}", "metrics.jsonl", "tensorboard")
# What a refused run may do instead; a new folder comes first, as the one choice open to any run (a
# different head or seed cannot continue the run that is there).
NEW_FOLDER = "--output NEW_FOLDER (train.output_dir) to start this run in a new folder"
OPTIONS = (
    f"{NEW_FOLDER}, --resume latest (train.resume=latest) to continue the run that is there, or --overwrite "
    "(train.overwrite=true) to replace it"
)


class RunFolderInUse(ConfigError):
    """The output folder holds another run, and the new one was told neither to continue nor to
    replace it."""


@dataclass
class FolderPlan:
    """What a run clears in its folder before it writes there (rank 0 applies it)."""

    folder: Path
    remove: list[str] = field(default_factory=list)  # paths relative to the folder
    reason: str = ""

    def apply(self) -> None:
        """Remove the old run's files and the temporaries of checkpoint writes that were killed. A
        link is removed as a link (its target is another folder's business); the log, written after
        the removals, names only what was removed."""
        removed: list[str] = []
        try:
            for name in self.remove:
                path = self.folder / name
                if path.is_symlink():
                    target = path.readlink()
                    path.unlink()
                    removed.append(f"{name} (a link to {target}, which is kept)")
                    continue
                shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
                removed.append(name)
        finally:
            if removed:
                logger.warning("%s: removed %s", self.reason, ", ".join(removed))
        for tmp in remove_stale_partials(self.folder / CHECKPOINT_DIR):
            logger.warning("removed %s, left by a checkpoint write that was killed", tmp)


def say_links_out(folder: Path) -> None:
    """Log each entry of the run folder that is a link out of it: the run reads and writes there (a
    checkpoint folder on a scratch disk, say), which a user should see once at the start."""
    if not folder.is_dir():
        return
    for entry in sorted(folder.iterdir()):
        if entry.is_symlink() and not _inside(entry, folder):
            logger.info(
                "%s is a symbolic link out of the run folder: the run writes in %s", entry.name, entry.resolve()
            )


def refuse_removal_outside(folder: Path, names: list[str]) -> None:
    """Refuse, before anything is removed, a run file that a linked folder puts outside the run
    folder: replacing a run must never delete another place's files."""
    for name in names:
        path = folder / name
        if path.is_symlink() or _inside(path.parent, folder):
            continue  # a link itself is removed as a link; a file whose folder is inside is ours
        raise ConfigError(
            f"train.overwrite: {path} lies outside the run folder, in {path.parent.resolve()} (a symbolic link "
            f"leads there); nothing outside {folder} is removed: remove that file yourself, or choose a new "
            "train.output_dir"
        )


def describe_run(folder: Path) -> str:
    """The run in ``folder`` as its ``config.yaml`` names it (head, seed, steps), for messages."""
    try:
        cfg = yaml.safe_load((folder / "config.yaml").read_text(encoding="utf-8"))
        return f"head {cfg['head']['name']}, seed {cfg['train']['seed']}, {cfg['train']['steps']} steps"
    except (OSError, yaml.YAMLError, TypeError, KeyError):
        return "no readable config.yaml"


def _present(folder: Path, patterns: tuple[str, ...]) -> list[str]:
    """The files and folders under ``folder`` that match ``patterns``, relative to it."""
    return [str(path.relative_to(folder)) for pattern in patterns for path in sorted(folder.glob(pattern))]


def _inside(path: Path, folder: Path) -> bool:
    return path.resolve().is_relative_to(folder.resolve())


def plan_run_folder(loop: TrainLoopConfig, resume_path: Path | None) -> FolderPlan:
    """Check that this run may use ``loop.output_dir`` and say what it clears there; raises
    ``RunFolderInUse`` (nothing is changed) when the folder holds a run it was not told about.

    ``resume_path``: the checkpoint ``train.resume`` resolved to (None: a fresh start).
    """
    folder = Path(loop.output_dir)
    say_links_out(folder)
    found = _present(folder, EVIDENCE)
    own_checkpoint = resume_path is not None and _inside(resume_path, folder)
    if loop.overwrite and (loop.resume == "latest" or own_checkpoint):
        raise ConfigError(
            f"train.overwrite and train.resume={loop.resume} contradict each other: --resume latest continues the "
            f"run in {folder}, --overwrite replaces it; give one"
        )
    if not found or own_checkpoint:  # nothing to protect, or this run continues its own checkpoint
        return FolderPlan(folder)
    run = describe_run(folder)
    if loop.overwrite:
        remove = _present(folder, RUN_FILES)
        refuse_removal_outside(folder, remove)
        return FolderPlan(folder, remove, f"train.overwrite: replacing the run in {folder} ({run})")
    held = f"{folder} holds a run ({run}; {', '.join(found)})"
    if loop.resume == "latest" and any(name in found for name in FINISHED):
        raise RunFolderInUse(
            f"{held} but no {CHECKPOINT_DIR}/{LATEST} to continue from: use {NEW_FOLDER}, or --overwrite to replace it"
        )
    if loop.resume == "latest":  # killed before its first latest.pt: nothing to continue, so it restarts
        remove = _present(folder, PROGRESS_FILES)
        refuse_removal_outside(folder, remove)
        return FolderPlan(
            folder,
            remove,
            f"{folder} has no checkpoint to resume: restarting its run ({run})",
        )
    if resume_path is not None:
        raise RunFolderInUse(
            f"{held}; resuming from {resume_path} would mix two runs in it: use {NEW_FOLDER}, or --overwrite to "
            "replace the run"
        )
    raise RunFolderInUse(f"{held}: use {OPTIONS}")
