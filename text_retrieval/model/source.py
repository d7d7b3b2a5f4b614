"""What a text model's name or folder must be, checked before transformers is asked to load it.

Given a CLIP export, an empty folder, a misspelt hub name or a folder that is not there,
transformers fails deep inside (a tokenizer backend that "could not be instantiated", or thirty
frames ending in a hub connection error on an offline machine); this check says in one line what
was given and what a text model is: a Hugging Face folder (``config.json`` and tokenizer files), a
clipmag text export (the same plus ``clipmag_head.json``), or a hub name that is cached here or
reachable online.
"""

from __future__ import annotations

from pathlib import Path

from clipmag.scoring.head_record import HeadRecord

__all__ = ["ModelSourceError", "check_text_model_source"]

EXPECTED = "a Hugging Face text model folder (config.json and tokenizer files) or a clipmag text export"


class ModelSourceError(FileNotFoundError):
    """The model named is not a text model this machine can load (a user error: one line)."""


def _is_clip_export(folder: Path) -> bool:
    """A clipmag CLIP export: its head record names a query tower (image or text)."""
    try:
        return HeadRecord.exists(folder) and HeadRecord.read(folder).query_side is not None
    except ValueError:
        return False


def _cached_on_this_machine(name: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return False
    try:
        return isinstance(try_to_load_from_cache(name, "config.json"), str)
    except ValueError:  # not a valid repository id
        return False


def _offline() -> bool:
    try:
        from huggingface_hub import constants
    except ImportError:
        return True
    return bool(constants.HF_HUB_OFFLINE)


def check_text_model_source(source: str) -> None:
    """Raise :class:`ModelSourceError` when ``source`` (a folder or hub name, after packaged names
    are resolved) cannot be a text model here; return quietly when it may be."""
    path = Path(source).expanduser()
    if path.is_dir():
        if not any(path.iterdir()):
            raise ModelSourceError(f"model {source}: an empty folder; expected {EXPECTED}")
        if _is_clip_export(path):
            raise ModelSourceError(
                f"model {source}: a clipmag CLIP export (image and text towers), not a text model; "
                "evaluate it with scripts/eval_clip_benchmark.py or train_clip.py's test"
            )
        if not (path / "config.json").is_file():
            raise ModelSourceError(f"model {source}: a folder without config.json; expected {EXPECTED}")
        return
    if path.exists():
        raise ModelSourceError(f"model {source}: a file; expected {EXPECTED}, or a Hugging Face hub name")
    if source.startswith((".", "/", "~")) or source.count("/") > 1:
        raise ModelSourceError(f"model {source}: no such folder")
    if _offline() and not _cached_on_this_machine(source):
        raise ModelSourceError(
            f"model {source}: no such folder, and no Hugging Face model of that name is cached on this machine "
            "(offline: HF_HUB_OFFLINE=1); check the spelling, give a local folder, or download it with a network"
        )
