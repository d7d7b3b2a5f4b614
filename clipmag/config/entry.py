"""Entry-point wrapper: user errors end with one clear line, not a traceback from deep inside.

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

from clipmag.config.checks import UserError

# ValueError: data-format errors name file and line; PermissionError: an unwritable output folder
# is the user's to fix, and its message names the path.
USER_ERRORS: tuple[type[BaseException], ...] = (UserError, FileNotFoundError, PermissionError, ValueError)


def run_entry_point(main: Callable[[Sequence[str]], Any], argv: Sequence[str] | None = None) -> None:
    """Call ``main(argv)``; on a user error print ``error: <message>`` and exit with status 2."""
    try:
        main(sys.argv[1:] if argv is None else argv)
    except USER_ERRORS as err:
        if os.environ.get("CLIPMAG_DEBUG"):
            raise
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    except KeyboardInterrupt:
        if os.environ.get("CLIPMAG_DEBUG"):
            raise
        print("interrupted (Ctrl-C)", file=sys.stderr)
        raise SystemExit(130) from None
