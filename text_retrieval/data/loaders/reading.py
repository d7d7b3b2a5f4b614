"""Shared reading functions for the evaluation data loaders.

Every loader reports bad input the same way: a :class:`DataFormatError` that names the file, the
1-based line number and what was expected there, so that a user can open the file at the right
line instead of guessing from a ``KeyError`` deep inside a pipeline. A byte that is not UTF-8 is
named the same way (:mod:`clipmag.storage.user_files`), a file that a folder's layout names must lie
in that folder (:func:`find_file` refuses a symbolic link out of it), and an error quotes only a
short prefix of what it found (:func:`preview`).
"""

from __future__ import annotations

import errno
import gzip
import io
import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from clipmag.storage.user_files import check_inside, named_decode_errors, preview

__all__ = [
    "DataFormatError",
    "open_text",
    "parse_json_lines",
    "iter_jsonl",
    "iter_tsv",
    "find_file",
    "preview",
    "require_str",
]


class DataFormatError(ValueError):
    """Malformed or inconsistent evaluation data; the message says where and what was expected."""

    def __init__(self, path: str | Path, line: int | None, expected: str, found: str | None = None) -> None:
        where = f"{path}" if line is None else f"{path}, line {line}"
        message = f"{where}: expected {expected}"
        if found is not None:
            message += f", found {found}"
        super().__init__(message)
        self.path = str(path)
        self.line = line
        self.expected = expected


def _raw(path: Path) -> IO[bytes]:
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")  # noqa: SIM115 - the caller closes it


@contextmanager
def open_text(path: str | Path) -> Iterator[IO[str]]:
    """A UTF-8 text file, transparently gunzipping ``*.gz``; newlines are kept as found. A byte that
    is not UTF-8, met anywhere in the block, is an error naming the file and its line."""
    path = Path(path)
    with named_decode_errors(path, lambda: _raw(path)), io.TextIOWrapper(_raw(path), "utf-8", newline="") as handle:
        yield handle


def parse_json_lines(lines: Iterable[tuple[int, str]], where: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, object)`` for every non-blank numbered line; each must be a JSON object
    (``where`` names the file, or the archive member, in errors). For readers of other line sources:
    an archive member, or lines split on ``\n`` only."""
    for number, line in lines:
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as err:
            raise DataFormatError(
                where, number, "one JSON object per line", f"invalid JSON ({err.msg}): {preview(line)}"
            ) from None
        if not isinstance(obj, dict):
            raise DataFormatError(where, number, "a JSON object", type(obj).__name__)
        yield number, obj


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, object)`` for every non-blank line; each line must be a JSON object."""
    with open_text(path) as handle:
        yield from parse_json_lines(enumerate(handle, start=1), path)


def iter_tsv(path: str | Path) -> Iterator[tuple[int, list[str]]]:
    """Yield ``(line_number, fields)`` split on tabs with no quoting; CR/LF endings are stripped.

    Quoting is deliberately not interpreted: STS sentences contain raw ``"`` characters, and a
    csv reader in its default dialect silently merges lines when it meets one.
    """
    with open_text(path) as handle:
        for number, line in enumerate(handle, start=1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            yield number, line.split("\t")


def find_file(folder: Path, *names: str) -> Path | None:
    """The first of ``names`` that exists in ``folder``, or None; one that is a symbolic link out of
    ``folder`` is refused (``LinkOutError``), whatever asked, and so is a directory of that name (an
    ``IsADirectoryError`` naming it: the layout is right but the file is not a file)."""
    for name in names:
        candidate = folder / name
        if candidate.is_file():
            return check_inside(candidate, folder)
        if candidate.is_dir():
            raise IsADirectoryError(errno.EISDIR, "Is a directory", str(candidate))
    return None


def require_str(obj: dict[str, Any], key: str, path: str | Path, line: int, allow_empty: bool = True) -> str:
    """``obj[key]`` as a string (ids may be given as JSON numbers); a clear error when missing."""
    if key not in obj or obj[key] is None:
        raise DataFormatError(path, line, f"a {key!r} field", f"keys {sorted(obj)}")
    value = obj[key]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise DataFormatError(path, line, f"{key!r} to be a string", type(value).__name__)
    if not allow_empty and not value.strip():
        raise DataFormatError(path, line, f"a non-empty {key!r}", "an empty string")
    return value
