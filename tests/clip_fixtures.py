"""Helpers shared by the image-text tests: small bundled-digits shard sets."""

from __future__ import annotations

from pathlib import Path

from image_text.data import shards_cli


def write_digit_shards(out: Path, train: int, val: int, test: int, per_class: int, shard_size: int) -> Path:
    """The composite digits as train / val / test shards and CLIP-benchmark sets under ``out``."""
    sizes = {"train": train, "val": val, "test": test, "per-class": per_class}
    shards_cli.main(
        ["--bundled", "--output", str(out), "--shard-size", str(shard_size)]
        + [arg for name, n in sizes.items() for arg in (f"--bundled-{name}", str(n))]
    )
    return out
