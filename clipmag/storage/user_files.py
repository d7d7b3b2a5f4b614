"""Files a user hands over (data sets, class-name lists, run folders): faults named by file and line,
and nothing read or removed outside the folder they were named by.

* **Not UTF-8.** Python's codec error names neither the file nor the line ("can't decode byte 0xe9
  in position 23"), and a trainer that reads its test set last met it after training. A decode error
  raised while reading is turned into :class:`NotUtf8Error` naming the file, the line, the column and
  the byte; the happy path reads as before, only a failure reads the raw bytes again to find the line.
* **Links out of a folder.** Data folders and run folders are downloaded, shared and copied; a
  ``corpus.jsonl`` in one that is a symbolic link to ``~/.aws/credentials`` would be read as data
  and its first line quoted in the error. A file that a folder's layout names must lie in that
  folder once links are followed (:func:`check_inside`), else it is refused in one line naming the
  link and where it leads. Linking a whole folder the user names (``data/beir -> /big/beir``) is the
  user's own choice and is followed: the check is against the folder as resolved.
* **Quoting.** An error quotes at most ``PREVIEW_CHARS`` characters of the line or value it found
  (:func:`preview`): enough to recognise it, never a whole record. A nested value is shown a few
  items and levels deep, so quoting a huge one costs no more than quoting a small one.
"""

from __future__ import annotations

import json
import reprlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import IO, Any

__all__ = [
    "read_json",
    "LinkOutError",
    "NotUtf8Error",
    "check_inside",
    "named_decode_errors",
    "non_blank_lines",
    "outside",
    "preview",
    "read_utf8",
]

PREVIEW_CHARS = 40


def _short_repr() -> reprlib.Repr:
    """A ``repr`` that stops after a few items and levels of a nested value."""
    short = reprlib.Repr()
    short.maxlevel, short.maxstring, short.maxother = 3, PREVIEW_CHARS, PREVIEW_CHARS
    short.maxlist = short.maxtuple = short.maxdict = short.maxset = 4
    return short


_SHORT_REPR = _short_repr()


class NotUtf8Error(ValueError):
    """A text file holds a byte sequence that is not UTF-8; the message names file, line and byte."""


class LinkOutError(ValueError):
    """A file of a folder leads outside it through a symbolic link."""


def _first_fault(lines: Iterable[bytes]) -> tuple[int, int, int] | None:
    """(line, column, byte) of the first byte that is not UTF-8, both 1-based; None if there is none.
    ``\\n`` never occurs inside a multi-byte character, so each line decodes on its own."""
    for number, raw in enumerate(lines, start=1):
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as err:
            return number, err.start + 1, raw[err.start]
    return None


@contextmanager
def named_decode_errors(where: str | Path, reopen: Callable[[], AbstractContextManager[IO[bytes]]]) -> Iterator[None]:
    """Turn a ``UnicodeDecodeError`` raised in the block into :class:`NotUtf8Error` naming ``where``;
    ``reopen`` gives the file's (decompressed) bytes again, read only to find the line."""
    try:
        yield
    except UnicodeDecodeError as err:
        with reopen() as raw:
            fault = _first_fault(raw)
        if fault is None:  # not met again line by line: say what the codec said
            raise NotUtf8Error(f"{where}: expected UTF-8 text ({err.reason}); convert the file to UTF-8") from None
        line, column, byte = fault
        raise NotUtf8Error(
            f"{where}, line {line}: expected UTF-8 text, found the byte 0x{byte:02x} at column {column}; "
            "convert the file to UTF-8 (e.g. iconv -f latin1 -t utf-8 for Latin-1 text)"
        ) from None


def read_utf8(path: str | Path) -> str:
    """The text of a UTF-8 file (newlines translated as ``Path.read_text`` does); a byte that is not
    UTF-8 raises :class:`NotUtf8Error` naming the line."""
    path = Path(path)
    with named_decode_errors(path, lambda: open(path, "rb")):
        return path.read_text(encoding="utf-8")


def read_json(path: str | Path) -> Any:
    """The value a UTF-8 JSON file holds; bad JSON raises ``ValueError`` naming the file, a byte that
    is not UTF-8 :class:`NotUtf8Error` naming the line."""
    try:
        return json.loads(read_utf8(path))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON: {err}") from None


def non_blank_lines(path: str | Path, what: str) -> list[str]:
    """The stripped non-blank lines of a UTF-8 text file (class names, prompt templates); ``what``
    names the setting in the error for a missing file."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"{what}: file not found: {path}")
    return [line.strip() for line in read_utf8(path).splitlines() if line.strip()]


def preview(value: Any) -> str:
    """``value`` (a line's text, or a field's value) as an error quotes it: its repr, cut short (a long
    text or a nested value is never written out whole, however large)."""
    if isinstance(value, str):  # the repr of a prefix twice as long as shown begins as the whole one's
        shown = repr(value[: 2 * PREVIEW_CHARS].rstrip("\r\n"))
    else:
        shown = _SHORT_REPR.repr(value)
    return shown if len(shown) <= PREVIEW_CHARS else shown[:PREVIEW_CHARS] + "..."


def outside(path: str | Path, folder: str | Path) -> Path | None:
    """Where ``path`` leads once links are followed, when that is outside ``folder`` (also resolved);
    None when it lies inside."""
    target = Path(path).resolve()
    return None if target.is_relative_to(Path(folder).resolve()) else target


def check_inside(path: str | Path, folder: str | Path) -> Path:
    """``path``, a file that ``folder``'s layout names; :class:`LinkOutError` when a symbolic link
    makes it lead outside ``folder``, before a byte of it is read."""
    target = outside(path, folder)
    if target is not None:
        raise LinkOutError(
            f"{path} leads outside {folder} through a symbolic link (to {target}); a folder's files are read "
            f"only from inside it: copy the file into {folder}"
        )
    return Path(path)
