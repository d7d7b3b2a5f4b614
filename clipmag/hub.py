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

import argparse
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from clipmag.head_record import HEAD_FILE, HeadRecord

logger = logging.getLogger("clipmag")

__all__ = ["push_export", "main"]

CARD_FILE = "README.md"


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


def main(argv: Sequence[str] | None = None) -> str:
    """``python -m clipmag.hub EXPORT REPO_ID``: push an export (text or CLIP) to the Hub."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("export", help="an export folder (with clipmag_head.json)")
    parser.add_argument("repo_id", help="the Hub model repository, e.g. user/name")
    parser.add_argument("--private", action="store_true")
    args = parser.parse_args(argv)
    url = push_export(args.export, args.repo_id, private=args.private)
    print(url)
    return url


if __name__ == "__main__":
    main()
