"""open_clip's false "initialized randomly" warning, silenced while clipmag builds a model whose every
tensor it loads next from its own files."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

RANDOM_INIT_NOTICE = "No pretrained weights loaded"  # open_clip's warning for a model it built without weights


class _DropRandomInitNotice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(RANDOM_INIT_NOTICE)


@contextlib.contextmanager
def weights_from_clipmag() -> Iterator[None]:
    """Around open_clip building a model whose every tensor clipmag loads next: its warning that the
    model was "initialized randomly" (logged on the root logger) would be false, so it is dropped."""
    notice = _DropRandomInitNotice()
    logging.getLogger().addFilter(notice)
    try:
        yield
    finally:
        logging.getLogger().removeFilter(notice)
