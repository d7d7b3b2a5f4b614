"""Sentence-pair similarity data with gold scores (STS Benchmark, SICK-R, STS12-16, generic tsv).

Formats recognised, all read with tabs and *no* quoting (sentences contain raw quotes):

* STS Benchmark ``sts-{train,dev,test}.csv``: no header, ``genre file year id score s1 s2`` and
  sometimes two extra source fields (9 in all); gold 0-5.
* SICK ``SICK_*.txt``: header ``pair_ID sentence_A sentence_B relatedness_score ...``, CRLF in the
  annotated test file; gold 1-5.
* Any tsv whose header names a first sentence, a second sentence and a score column
  (``sentence1``/``sentence_A``/``text_a``, ``sentence2``/``sentence_B``/``text_b``,
  ``score``/``relatedness_score``/``label``), e.g. the SentEval STS12-16 files (gold 0-5, known by
  their names ``sts12.tsv`` ... ``sts16.tsv``);
* a headerless generic tsv ``text_a  text_b  score``.

Gold scores are kept as given, on the file's own scale: Pearson and Spearman do not depend on it,
and an evaluation's ``gold_range`` is the observed minimum and maximum on that scale. Each pair set
also carries its *declared* scale (:class:`GoldScale`): STS Benchmark and STS12-16 0-5, SICK 1-5,
otherwise what the caller declares. A score outside the declared scale is an error naming the file
and line; the ``sts`` training objective regresses onto :meth:`STSPairs.unit_scores`,
``(gold - lo) / (hi - lo)``, as sentence-transformers does, so heads whose scores lie near [-1, 1]
are not asked for a 5.
"""

from __future__ import annotations

import itertools
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from clipmag.storage.user_files import check_inside
from text_retrieval.data.loaders.reading import DataFormatError, iter_tsv

logger = logging.getLogger("clipmag")

__all__ = ["STSPairs", "GoldScale", "load_sts_file", "load_sts", "is_sts_path", "STS_SPLIT_FILES"]

_A_NAMES = {"sentence1", "sentence_a", "text_a", "sentence 1", "s1"}
_B_NAMES = {"sentence2", "sentence_b", "text_b", "sentence 2", "s2"}
_SCORE_NAMES = {"score", "relatedness_score", "label", "gold", "similarity"}

# split name -> file names tried in an STS folder
STS_SPLIT_FILES = {
    "test": ("sts-test.csv", "SICK_test_annotated.txt", "test.tsv"),
    "dev": ("sts-dev.csv", "SICK_trial.txt", "dev.tsv"),
    "validation": ("sts-dev.csv", "SICK_trial.txt", "dev.tsv"),
    "train": ("sts-train.csv", "SICK_train.txt", "train.tsv"),
}


class GoldScale(NamedTuple):
    """The range ``[lo, hi]`` a file's gold scores are declared to lie in, and who declared it."""

    lo: float
    hi: float
    source: str

    def describe(self) -> str:
        return f"a gold score in [{self.lo:g}, {self.hi:g}] ({self.source})"


STSB_SCALE = GoldScale(0.0, 5.0, "the STS Benchmark scale")
SICK_SCALE = GoldScale(1.0, 5.0, "the SICK relatedness scale")
STS12_16_SCALE = GoldScale(0.0, 5.0, "the STS12-16 scale")
_STS12_16_NAME = re.compile(r"sts1[2-6]\.tsv", re.IGNORECASE)


@dataclass
class STSPairs:
    """Sentence pairs ``(a[i], b[i])`` with gold similarity ``scores[i]`` on the file's own scale;
    ``gold_scale`` is the declared range (None: a file of no known scale and none declared)."""

    name: str
    a: list[str]
    b: list[str]
    scores: np.ndarray
    source: str = ""
    kind: str = "sts"
    gold_scale: GoldScale | None = None

    def __post_init__(self) -> None:
        self.scores = np.asarray(self.scores, dtype=np.float64)
        if not (len(self.a) == len(self.b) == len(self.scores)):
            raise ValueError(
                f"{self.name}: {len(self.a)} / {len(self.b)} / {len(self.scores)} sentences a / b / scores"
            )
        if len(self.a) < 2:
            raise ValueError(f"{self.name}: need at least 2 scored pairs for a correlation, got {len(self.a)}")

    def __len__(self) -> int:
        return len(self.a)

    def unit_scores(self) -> np.ndarray:
        """Gold mapped onto [0, 1] by the declared scale: ``(gold - lo) / (hi - lo)``."""
        if self.gold_scale is None:
            raise ValueError(f"{self.source or self.name}: no gold scale is known for this file; declare one")
        lo, hi, _ = self.gold_scale
        return (self.scores - lo) / (hi - lo)


def _score(text: str, path: Path, line: int, column: int, scale: GoldScale | None) -> float:
    try:
        value = float(text)
    except ValueError:
        raise DataFormatError(path, line, f"a numeric gold score in field {column + 1}", repr(text)) from None
    if not np.isfinite(value):
        raise DataFormatError(path, line, f"a finite gold score in field {column + 1}", repr(text))
    if scale is not None and not scale.lo <= value <= scale.hi:
        raise DataFormatError(path, line, f"{scale.describe()} in field {column + 1}", repr(text))
    return value


def _known_scale(path: Path, layout: str, header: list[str]) -> GoldScale | None:
    """The scale a recognised format fixes: STS Benchmark lines, a SICK header, an STS12-16 file name."""
    if layout == "stsb":
        return STSB_SCALE
    if layout == "header" and "relatedness_score" in (h.strip().lower() for h in header):
        return SICK_SCALE
    if _STS12_16_NAME.fullmatch(path.name):
        return STS12_16_SCALE
    return None


def _columns_from_header(header: list[str]) -> tuple[int, int, int] | None:
    names = [h.strip().lower() for h in header]
    try:
        a = next(i for i, n in enumerate(names) if n in _A_NAMES)
        b = next(i for i, n in enumerate(names) if n in _B_NAMES)
        s = next(i for i, n in enumerate(names) if n in _SCORE_NAMES)
    except StopIteration:
        return None
    return a, b, s


def _is_stsb_line(fields: list[str]) -> bool:
    if len(fields) not in (7, 9):
        return False
    try:
        float(fields[4])
    except ValueError:
        return False
    return True


def load_sts_file(
    path: str | Path,
    name: str | None = None,
    gold_scale: GoldScale | None = None,
    default_scale: GoldScale | None = None,
) -> STSPairs:
    """Load one scored sentence-pair file, recognising the format from its first line.

    The declared scale is ``gold_scale`` if given, else the format's own (STS Benchmark, SICK,
    STS12-16), else ``default_scale``; every score must lie in it (an error names file and line).
    With none of the three, scores are read as they are and ``gold_scale`` stays None.
    """
    path = Path(path)
    for scale in (gold_scale, default_scale):
        if scale is not None and not scale.lo < scale.hi:
            raise ValueError(f"{path}: a gold scale needs lo < hi, got [{scale.lo}, {scale.hi}] ({scale.source})")
    if not path.is_file():
        raise FileNotFoundError(f"STS file not found: {path}")
    rows = iter_tsv(path)
    try:
        first_number, first = next(rows)
    except StopIteration:
        raise DataFormatError(path, None, "scored sentence pairs", "an empty file") from None

    header_columns = _columns_from_header(first)
    if header_columns is not None:
        layout, (ia, ib, isc), width, pending = "header", header_columns, len(first), []
    elif _is_stsb_line(first):
        layout, (ia, ib, isc), width, pending = "stsb", (5, 6, 4), 7, [(first_number, first)]
    elif len(first) == 3:
        layout, (ia, ib, isc), width, pending = "generic", (0, 1, 2), 3, [(first_number, first)]
    else:
        raise DataFormatError(
            path,
            first_number,
            "an STS Benchmark line (7 or 9 tab-separated fields), a header naming sentence1/sentence2/score "
            "columns, or 3 fields text_a<TAB>text_b<TAB>score",
            f"{len(first)} field(s)",
        )
    scale = gold_scale or _known_scale(path, layout, first) or default_scale

    a: list[str] = []
    b: list[str] = []
    gold: list[float] = []
    for number, fields in itertools.chain(pending, rows):
        if layout == "stsb" and len(fields) not in (7, 9):
            raise DataFormatError(path, number, "7 or 9 tab-separated fields (STS Benchmark)", f"{len(fields)}")
        if layout != "stsb" and len(fields) < width:
            raise DataFormatError(path, number, f"{width} tab-separated fields", f"{len(fields)}")
        text_a, text_b = fields[ia].strip(), fields[ib].strip()
        score_text = fields[isc].strip()
        if layout == "header" and score_text == "":
            continue  # SentEval files may list unscored pairs
        if not text_a or not text_b:
            raise DataFormatError(path, number, "two non-empty sentences", f"{text_a!r} / {text_b!r}")
        a.append(text_a)
        b.append(text_b)
        gold.append(_score(score_text, path, number, isc, scale))
    if len(a) < 2:
        raise DataFormatError(path, None, "at least 2 scored sentence pairs", f"{len(a)}")
    declared = f"[{scale.lo:g}, {scale.hi:g}]" if scale else "undeclared"
    logger.info("loaded %s: %d pairs (%s layout, gold scale %s)", path.name, len(a), layout, declared)
    return STSPairs(
        name=name or path.stem, a=a, b=b, scores=np.asarray(gold), source=str(path.resolve()), gold_scale=scale
    )


def _sts_files(folder: Path) -> list[Path]:
    return sorted(
        p
        for p in folder.iterdir()
        if p.is_file()
        and p.suffix in {".csv", ".tsv", ".txt"}
        and p.name != "LICENSE.txt"
        and not p.name.startswith(".")
    )


def is_sts_path(path: str | Path) -> bool:
    """A scored pair file, or a folder holding STS split files or a set of tsv files."""
    path = Path(path)
    if path.is_file():
        return path.suffix in {".csv", ".tsv", ".txt"} or path.name.endswith(".tsv.gz")
    return path.is_dir() and any(p.suffix in {".csv", ".tsv"} or p.name.startswith("SICK_") for p in _sts_files(path))


def load_sts(path: str | Path, split: str = "test") -> list[STSPairs]:
    """Load an STS file, or an STS folder: its ``split`` file when it has the standard split names
    (STS Benchmark, SICK), otherwise every scored file in it (STS12-16 style)."""
    path = Path(path)
    if path.is_file():
        return [load_sts_file(path)]
    if not path.is_dir():
        raise FileNotFoundError(f"STS data not found: {path}")
    split_names = STS_SPLIT_FILES.get(split)
    if split_names is None:
        raise ValueError(f"unknown STS split {split!r}; known: {sorted(STS_SPLIT_FILES)}")
    for file_name in split_names:
        if (path / file_name).is_file():
            return [load_sts_file(check_inside(path / file_name, path), name=f"{path.name}-{split}")]
    files = [p for p in _sts_files(path) if not any(p.name in names for names in STS_SPLIT_FILES.values())]
    if not files:
        raise FileNotFoundError(f"{path}: no STS file for split {split!r} (tried {', '.join(split_names)})")
    return [load_sts_file(check_inside(p, path)) for p in files]
