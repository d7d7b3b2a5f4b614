"""Publishing an export on the Hugging Face Hub, with its head record and model card.

The head is part of the model, so it must travel with a published one: the whole export folder is
uploaded, ``clipmag_head.json`` included. A text export carries its model card already (its
``README.md``, written by ``TextEncoder.save_pretrained`` and completed with the test metrics by
the trainer), and so does a CLIP export (written by the image-text front end's export),
saying how open_clip loads the towers and how the head scores their features.

    python -m clipmag.hub runs/text/default/export user/minilm-code-search
    python -m clipmag.hub runs/clip/export user/clipmag-tiny-digits --private
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clipmag.config.command_line import parse_cli, require_words
from clipmag.config.entry import run_entry_point
from clipmag.scoring.head_record import CARD_FILE, HEAD_FILE, HeadRecord

logger = logging.getLogger("clipmag")

__all__ = ["PushCommand", "push_export", "main"]


def push_export(
    export: str | Path, repo_id: str, private: bool = False, token: str | None = None, api: Any = None
) -> str:
    """Upload ``export`` (head record and model card included) to the model repository ``repo_id``,
    creating it if needed; returns the commit URL. ``api`` defaults to ``huggingface_hub.HfApi``."""
    export = Path(export)
    if not HeadRecord.exists(export):
        raise FileNotFoundError(f"{export / HEAD_FILE} not found: {export} is not a clipmag export")
    record = HeadRecord.read(export)
    if not (export / CARD_FILE).is_file():
        logger.warning("%s has no model card; re-export it with this clipmag to get one", export)
    if api is None:
        from huggingface_hub import HfApi

        api = HfApi(token=token)
    api.create_repo(repo_id, private=private, exist_ok=True)
    commit = api.upload_folder(
        folder_path=str(export), repo_id=repo_id, commit_message=f"clipmag export, {record.head_name} head"
    )
    url = str(getattr(commit, "commit_url", commit))
    logger.info("pushed %s to %s", export, url)
    return url


@dataclass
class PushCommand:
    """EXPORT REPO_ID: an export folder (with clipmag_head.json) and the Hub model repository (user/name)."""

    export: str = ""
    repo_id: str = ""
    private: bool = False


def main(argv: Sequence[str]) -> str:
    """``python -m clipmag.hub EXPORT REPO_ID [--private]``: push an export (text or CLIP) to the Hub."""
    cmd = parse_cli(PushCommand, argv, {"private": "private"}, description=__doc__, positional=("export", "repo_id"))
    require_words(cmd, ("export", "repo_id"))
    url = push_export(cmd.export, cmd.repo_id, private=cmd.private)
    print(url)
    return url


if __name__ == "__main__":
    run_entry_point(main)
