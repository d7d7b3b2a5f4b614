"""``<sweep folder>/caption_layout.json``: the image each caption of a CLIP test set belongs to.

The report tests text -> image queries with the image as the unit (its captions are one cluster), so
it needs each caption's image. A run records it with its test results (``image_of_text``); runs
from before that, on a set whose images carry different numbers of captions (the emoji set: 3-7),
cannot be grouped by the equal-count layout rule. This file supplies the grouping from the test
shards themselves, read exactly as the evaluation reads them (same order, same flattening), so the
report never guesses it:

    python -m clipmag_experiments.sweep.caption_layout runs/clip_emoji data/emoji/test

The archive copies it with the results; the report checks its length against each run's counts.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

from clipmag.config.entry import run_entry_point
from clipmag.errors import ConfigError
from clipmag.storage.files import write_text_atomic
from image_text.data.reading import caption_owners, dataset_name, validate_shards

__all__ = ["CAPTION_LAYOUT_FILE", "read_caption_layouts", "write_caption_layout"]

CAPTION_LAYOUT_FILE = "caption_layout.json"


def write_caption_layout(folder: str | Path, specs: Sequence[str]) -> Path:
    """Record, for each test set in ``specs`` (shard folders or patterns), the image row of every
    caption in the evaluation's order, with the shards' sha256 so that a rebuilt set that differs shows."""
    record = {}
    for spec in specs:
        paths = validate_shards(spec, "caption layout")
        digest = hashlib.sha256()
        for path in paths:
            digest.update(Path(path).read_bytes())
        record[dataset_name(spec)] = {
            "shards": spec,
            "sha256": digest.hexdigest(),
            "image_of_text": caption_owners(spec, "caption layout"),
        }
    path = Path(folder) / CAPTION_LAYOUT_FILE
    write_text_atomic(path, json.dumps(record) + "\n")
    return path


def read_caption_layouts(folder: str | Path) -> dict[str, list[int]]:
    """The layouts recorded in ``folder`` by test set name (empty without the file)."""
    path = Path(folder) / CAPTION_LAYOUT_FILE
    if not path.is_file():
        return {}
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        return {name: [int(i) for i in entry["image_of_text"]] for name, entry in record.items()}
    except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as err:
        raise ConfigError(
            f"{path}: not a caption layout ({err}); write it again with python -m "
            "clipmag_experiments.sweep.caption_layout FOLDER TEST_SHARDS"
        ) from None


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m clipmag_experiments.sweep.caption_layout",
        description="Record the image of every caption of CLIP test sets beside a sweep's runs.",
    )
    parser.add_argument("folder", help="the sweep folder (runs/clip_emoji) the report reads")
    parser.add_argument("shards", nargs="+", help="each test set's shard folder or pattern (data/emoji/test)")
    args = parser.parse_args(argv)
    print(write_caption_layout(args.folder, args.shards))


if __name__ == "__main__":
    run_entry_point(main)
