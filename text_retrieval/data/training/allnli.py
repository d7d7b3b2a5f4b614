"""AllNLI + STS-B: the STS training file of the paper's symmetric-task check, from the published sets.

Sources, each a versioned release (its SHA-256 is recorded in the manifest):

* SNLI 1.0 (``snli_1.0.zip``, member ``snli_1.0/snli_1.0_train.jsonl``) and MultiNLI 1.0
  (``multinli_1.0.zip``, member ``multinli_1.0/multinli_1.0_train.jsonl``): the train splits, one
  ``{"gold_label", "sentence1", "sentence2", ...}`` per line - "AllNLI" as sentence-transformers
  names their union;
* STS Benchmark (``Stsbenchmark.tar.gz``, member ``stsbenchmark/sts-train.csv``): its train split,
  gold 0-5.

Written: one tsv with the header ``sentence1  sentence2  score`` and every score in [0, 1], which the
``sts`` objective reads on its [0, 1] default scale (``data/sts/train.tsv`` in
``configs/text/paper_sts.yaml``); a manifest beside it (``train.manifest.json``) records the
sources, the label mapping and the counts. NLI labels become similarities by :data:`NLI_SCORES`
(the paper gives no mapping; docs/method.md says why this one); STS-B gold is divided by 5. Pairs
without a gold label (SNLI's ``-``) or with an empty sentence are left out and counted; tabs and
line breaks inside a sentence become spaces, since the tsv reader splits on them.
"""

from __future__ import annotations

import io
import logging
import re
import tarfile
import tempfile
import zipfile
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO, Any

from clipmag.storage.files import replace_on_success
from clipmag.storage.user_files import named_decode_errors
from text_retrieval.data.loaders.reading import DataFormatError, parse_json_lines
from text_retrieval.data.loaders.sts import load_sts_file
from text_retrieval.data.training.write import sha256_of, write_manifest

logger = logging.getLogger("clipmag")

__all__ = ["NLI_SCORES", "SOURCES", "Source", "locate", "read_nli", "build_allnli_sts"]

NLI_SCORES = {"entailment": 1.0, "neutral": 0.5, "contradiction": 0.0}
STS_SCALE = 5.0


class Source:
    """One published file: the archive's URL and the member this builder reads from it."""

    def __init__(self, url: str, member: str) -> None:
        self.url, self.member = url, member
        self.archive = url.rsplit("/", 1)[-1]

    @property
    def file_name(self) -> str:
        return self.member.rsplit("/", 1)[-1]


SOURCES = {
    "snli": Source("https://nlp.stanford.edu/projects/snli/snli_1.0.zip", "snli_1.0/snli_1.0_train.jsonl"),
    "mnli": Source("https://cims.nyu.edu/~sbowman/multinli/multinli_1.0.zip", "multinli_1.0/multinli_1.0_train.jsonl"),
    "stsb": Source("https://ixa2.si.ehu.eus/stswiki/images/4/48/Stsbenchmark.tar.gz", "stsbenchmark/sts-train.csv"),
}
_SPACE = re.compile(r"[\t\r\n]+")


def locate(folder: str | Path, source: Source) -> Path:
    """``source``'s file in ``folder`` (searched recursively): the unpacked member, else the archive."""
    folder = Path(folder)
    for name in (source.file_name, source.archive):
        found = sorted(p for p in folder.rglob(name) if p.is_file() and "__MACOSX" not in p.parts)
        if found:
            return found[0]
    raise FileNotFoundError(f"{folder}: neither {source.file_name} nor {source.archive} (from {source.url})")


def _where(path: Path, source: Source) -> str:
    """How errors name ``source``'s text: the file, or the archive and its member."""
    return str(path) if path.name == source.file_name else f"{path}:{source.member}"


@contextmanager
def _open_raw(path: Path, source: Source) -> Iterator[IO[bytes]]:
    """The bytes of ``source``'s member: ``path`` itself, or the member inside the archive ``path``."""
    if path.name == source.file_name:
        with open(path, "rb") as fh:
            yield fh
        return
    with ExitStack() as stack:
        try:
            if zipfile.is_zipfile(path):
                raw = stack.enter_context(stack.enter_context(zipfile.ZipFile(path)).open(source.member))
            else:
                raw = stack.enter_context(tarfile.open(path)).extractfile(source.member)
        except (KeyError, OSError, tarfile.TarError, zipfile.BadZipFile) as err:
            raise DataFormatError(
                path, None, f"an archive holding {source.member}", f"{type(err).__name__}: {err}"
            ) from None
        if raw is None:
            raise DataFormatError(path, None, f"{source.member} to be a file in the archive")
        yield raw


@contextmanager
def _open_member(path: Path, source: Source) -> Iterator[IO[str]]:
    """The UTF-8 text of ``source``'s member; a byte that is not UTF-8 is named with its line."""
    with named_decode_errors(_where(path, source), lambda: _open_raw(path, source)), _open_raw(path, source) as raw:
        yield io.TextIOWrapper(raw, encoding="utf-8", newline="")


def _clean(text: Any) -> str:
    return _SPACE.sub(" ", text).strip() if isinstance(text, str) else ""


def read_nli(path: Path, source: Source) -> Iterator[tuple[str, str, str]]:
    """``(sentence1, sentence2, gold_label)`` of every line of an SNLI/MultiNLI jsonl (``-`` included)."""
    where = _where(path, source)
    with _open_member(path, source) as fh:
        for number, obj in parse_json_lines(enumerate(fh, start=1), where):
            label = obj.get("gold_label")
            if label not in (*NLI_SCORES, "-"):
                raise DataFormatError(where, number, f"gold_label in {[*NLI_SCORES, '-']}", repr(label))
            yield _clean(obj.get("sentence1")), _clean(obj.get("sentence2")), label


def _nli_pairs(path: Path, source: Source, counts: Counter) -> Iterator[tuple[str, str, float]]:
    """The scored pairs of an NLI file; ``counts`` gets each label written and each reason left out."""
    for a, b, label in read_nli(path, source):
        counts["read"] += 1
        reason = "no_gold_label" if label == "-" else None if a and b else "empty_sentence"
        counts[reason or label] += 1
        if reason is None:
            yield a, b, NLI_SCORES[label]


def _sts_pairs(path: Path, source: Source, counts: Counter) -> Iterator[tuple[str, str, float]]:
    """STS-B train pairs with gold on [0, 1], read by the project's STS loader (0-5, checked)."""
    with tempfile.TemporaryDirectory() as tmp:
        local = path
        if path.name != source.file_name:
            local = Path(tmp) / source.file_name
            with _open_member(path, source) as fh:
                local.write_text(fh.read(), encoding="utf-8", newline="")
        pairs = load_sts_file(local)
    counts["read"] = len(pairs)
    for a, b, score in zip(pairs.a, pairs.b, pairs.scores):
        yield _clean(a), _clean(b), float(score) / STS_SCALE


def build_allnli_sts(source: str | Path, out_file: str | Path) -> dict[str, Any]:
    """Write ``out_file`` (tsv, header ``sentence1 sentence2 score``) and ``<stem>.manifest.json``
    beside it from the three published files found in ``source`` (see :func:`locate`)."""
    found = {name: locate(source, spec) for name, spec in SOURCES.items()}
    counts = {name: Counter() for name in SOURCES}
    readers = {"snli": _nli_pairs, "mnli": _nli_pairs, "stsb": _sts_pairs}
    out_file = Path(out_file)
    with replace_on_success(out_file) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as fh:
        fh.write("sentence1\tsentence2\tscore\n")
        for name, read in readers.items():
            for a, b, score in read(found[name], SOURCES[name], counts[name]):
                fh.write(f"{a}\t{b}\t{score:.6g}\n")
                counts[name]["written"] += 1
    manifest = {
        "file": out_file.name,
        "columns": ["sentence1", "sentence2", "score"],
        "scale": [0.0, 1.0],
        "nli_scores": NLI_SCORES,
        "stsb_scores": f"gold / {STS_SCALE:g} (STS Benchmark gold is 0-5)",
        "sources": {
            name: {"url": spec.url, "member": spec.member, "file": found[name].name, "sha256": sha256_of(found[name])}
            for name, spec in SOURCES.items()
        },
        "counts": {name: dict(c) for name, c in counts.items()},
        "pairs": sum(c["written"] for c in counts.values()),
    }
    write_manifest(out_file.with_name(f"{out_file.stem}.manifest.json"), manifest)
    logger.info("AllNLI + STS-B: %d pairs -> %s", manifest["pairs"], out_file)
    return manifest
