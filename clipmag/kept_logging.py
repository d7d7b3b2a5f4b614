"""Running another tool's ``main`` in this process without losing this process's logging.

A tool's ``main`` sets logging up for itself (``--quiet`` drops the "clipmag" logger to warnings,
its handlers are replaced), so a sweep that ran a preparation step or an evaluation in-process
went on without its progress lines and its ``out.log``. :func:`caller_logging_kept` puts the
caller's level and handlers back afterwards.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from clipmag.run_logging import LOGGER_NAME

__all__ = ["caller_logging_kept"]


@contextmanager
def caller_logging_kept() -> Iterator[None]:
    """Restore the "clipmag" logger's level and handlers when the block ends (a file handler the
    block closed reopens in append mode on its next record)."""
    log = logging.getLogger(LOGGER_NAME)
    level, handlers = log.level, list(log.handlers)
    try:
        yield
    finally:
        for handler in [h for h in log.handlers if h not in handlers]:
            log.removeHandler(handler)
            handler.close()
        for handler in handlers:
            if handler not in log.handlers:
                log.addHandler(handler)
        log.setLevel(level)
