"""Entry-point wrapper of every console script: a user error ends with one clear line, not a traceback
from deep inside, and a reader that stops early (``clipmag-train-text --help | head``) ends the
command quietly.

Configuration, data-format, missing-file and divergence errors are the user's to fix; their
messages already name the key, file or step. Ctrl-C ends a command in one line too (a trainer
stops at its next step boundary first, :mod:`clipmag.train.stop_signals`). Set ``CLIPMAG_DEBUG=1``
to see the traceback.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from clipmag.errors import UserError

# ValueError: data-format errors name file and line; PermissionError: an unwritable output folder
# is the user's to fix, and its message names the path; a directory given where a file is expected
# (or the reverse) likewise.
USER_ERRORS: tuple[type[BaseException], ...] = (
    UserError,
    FileNotFoundError,
    PermissionError,
    IsADirectoryError,
    NotADirectoryError,
    ValueError,
)
# What a command stopped by SIGPIPE reports (128 + 13), as ``yes | head`` does.
BROKEN_PIPE_STATUS = 141


def _silence_stdout() -> None:
    """Point standard output at the null device, so the interpreter's last flush of what the closed
    pipe did not take writes nowhere instead of printing another BrokenPipeError."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (a test's capture): nothing to flush
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def user_message(err: BaseException) -> str:
    """The one line that tells the user what to fix: the error's own message, but for a directory
    where a file is expected, or the reverse, a sentence naming the path as such (the system's
    ``[Errno 21] Is a directory`` leaves the reader to guess which was wanted)."""
    if isinstance(err, IsADirectoryError) and err.filename:
        return f"{err.filename}: is a directory, where a file is expected; give the file (or remove the directory)"
    if isinstance(err, NotADirectoryError) and err.filename:
        return f"{err.filename}: a part of this path is a file, where a directory is expected"
    return str(err)


def run_entry_point(main: Callable[[Sequence[str]], Any], argv: Sequence[str] | None = None) -> None:
    """Call ``main(argv)``; on a user error print ``error: <message>`` and exit with status 2; when the
    reader of standard output has gone (a closed pipe) exit with status 141 and no traceback."""
    try:
        try:
            main(sys.argv[1:] if argv is None else argv)
        finally:  # what is still buffered goes now, so a closed pipe is caught below
            sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
        raise SystemExit(BROKEN_PIPE_STATUS) from None
    except USER_ERRORS as err:
        if os.environ.get("CLIPMAG_DEBUG"):
            raise
        print(f"error: {user_message(err)}", file=sys.stderr)
        raise SystemExit(2) from None
    except KeyboardInterrupt:
        if os.environ.get("CLIPMAG_DEBUG"):
            raise
        print("interrupted (Ctrl-C)", file=sys.stderr)
        raise SystemExit(130) from None
