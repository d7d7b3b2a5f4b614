"""Fetch the public evaluation sets into the local layouts the loaders read.

    python -m text_retrieval.data.download bright data/bright                      # 12 tasks, standard
    python -m text_retrieval.data.download bright data/bright --long-documents     # + long documents
    python -m text_retrieval.data.download bright data/bright --reasoning gpt4_reason
    python -m text_retrieval.data.download beir scifact data/beir
    python -m text_retrieval.data.download msmarco data/msmarco80k                  # the paper's training set
    python -m text_retrieval.data.download msmarco data/msmarco500k --size 500k
    python -m text_retrieval.data.download allnli data/sts                          # data/sts/train.tsv

Network access is checked first with a short connection attempt, so an offline machine gets an
immediate, explicit error (with the URL to fetch by hand) instead of a long hang in a retry loop.
BRIGHT and MS MARCO are fetched at pinned dataset revisions, recorded next to the files. The
training-set builders (``msmarco.py``, ``msmarco_passage.py``, ``allnli.py``) convert local copies;
``--source DIR`` hands them files fetched by hand, and without it they fetch into ``<root>/raw``.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from clipmag.entry import run_entry_point
from clipmag.files import download, write_text_atomic
from clipmag.run_logging import setup_logging
from text_retrieval.data import training_download
from text_retrieval.data.allnli import SOURCES as NLI_SOURCES
from text_retrieval.data.bright import (
    BRIGHT_REPO,
    BRIGHT_REVISION,
    BRIGHT_TASKS,
    LONG_DOCUMENT_TASKS,
    REASONING_CONFIGS,
    SOURCE_FILE,
)
from text_retrieval.data.fetch import BEIR_URL, check_online, download_beir, unpack

logger = logging.getLogger("clipmag")

__all__ = ["BEIR_URL", "STS_SOURCES", "check_online", "download_beir", "download_bright", "download_sts", "main"]

STS_SOURCES = {
    "stsbenchmark": NLI_SOURCES["stsb"].url,
    "sickr": "https://zenodo.org/record/2787612/files/SICK.zip",
}


def download_sts(name: str, root: str | Path, source: str | Path | None = None) -> Path:
    """Download ``stsbenchmark`` or ``sickr`` into ``root/name`` (the loaders read these as found);
    ``source``: the published archive fetched by hand, unpacked instead of downloading."""
    if name not in STS_SOURCES:
        raise ValueError(f"unknown STS source {name!r}; known: {sorted(STS_SOURCES)}")
    if source is not None and not Path(source).is_file():
        raise FileNotFoundError(f"--source {source}: no such archive (expected {STS_SOURCES[name]} fetched by hand)")
    folder = Path(root) / name
    folder.mkdir(parents=True, exist_ok=True)
    url = STS_SOURCES[name]
    with tempfile.TemporaryDirectory() as tmp:
        if source is None:
            check_online(url, hint="fetch it on a connected machine and pass the archive as --source FILE")
        archive = Path(source) if source else download(url, Path(tmp) / Path(urlparse(url).path).name)
        unpacked = Path(tmp) / "unpacked"
        unpack(archive, unpacked)
        for path in unpacked.rglob("*"):
            if path.is_file() and (path.name.startswith(("sts-", "SICK")) and path.suffix in {".csv", ".txt"}):
                shutil.copy2(path, folder / path.name)
    return folder


def _bright_tasks(tasks: Sequence[str] | None, long_documents: bool, reasoning: Sequence[str]) -> tuple[str, ...]:
    """The tasks to fetch, checked: the long setting exists only for the tasks with long documents."""
    chosen = tuple(tasks or (LONG_DOCUMENT_TASKS if long_documents else BRIGHT_TASKS))
    unknown = sorted(set(chosen) - set(BRIGHT_TASKS))
    if unknown:
        raise ValueError(f"unknown BRIGHT task(s) {unknown}; known: {', '.join(BRIGHT_TASKS)}")
    short_only = [t for t in chosen if long_documents and t not in LONG_DOCUMENT_TASKS]
    if short_only:
        raise ValueError(
            f"BRIGHT has no long documents for {short_only}; the long setting covers {', '.join(LONG_DOCUMENT_TASKS)}"
        )
    bad = sorted(set(reasoning) - set(REASONING_CONFIGS))
    if bad:
        raise ValueError(f"unknown BRIGHT reasoning config(s) {bad}; known: {', '.join(REASONING_CONFIGS)}")
    return chosen


def _task_manifest(folder: Path, revision: str) -> dict[str, Any]:
    """The folder's ``bright_source.json`` (new if absent); files of another revision are not mixed in."""
    path = folder / SOURCE_FILE
    if not path.is_file():
        return {"repo": BRIGHT_REPO, "revision": revision, "files": {}}
    manifest = json.loads(path.read_text(encoding="utf-8"))
    if manifest.get("revision") != revision:
        raise ValueError(
            f"{path}: this folder holds BRIGHT revision {manifest.get('revision')!r}, not {revision!r}; "
            "download into another root so that every result names one revision"
        )
    return manifest


def download_bright(
    root: str | Path,
    tasks: Sequence[str] | None = None,
    long_documents: bool = False,
    reasoning: Sequence[str] = (),
    revision: str = BRIGHT_REVISION,
    snapshot: str | Path | None = None,
) -> Path:
    """Fetch BRIGHT at a pinned revision into ``root/<task>/`` as the loader reads it.

    Standard setting: ``examples.jsonl`` and ``documents.jsonl`` of all 12 tasks by default.
    ``long_documents``: ``long_documents.jsonl`` instead of ``documents.jsonl``, for the tasks that
    have them (the 7 StackExchange tasks and pony, by default). ``reasoning`` adds reasoning-query
    configs (``gpt4_reason``, ...), each written as ``<config>.jsonl`` next to the plain examples.
    ``snapshot`` is a local copy of the hub repository (``<config>/<task>-*.parquet``) to convert
    instead of downloading; ``revision`` then names its revision. ``bright_source.json`` in each task
    folder records the repository, revision and row counts; results carry the revision.
    """
    tasks = _bright_tasks(tasks, long_documents, reasoning)
    configs = ["examples", "long_documents" if long_documents else "documents", *reasoning]
    try:
        import pyarrow.parquet as pq
    except ImportError as err:
        raise ImportError(f"download_bright needs pyarrow: {err}") from None
    if snapshot is None:
        check_online(f"https://huggingface.co/datasets/{BRIGHT_REPO}")
        from huggingface_hub import snapshot_download

        patterns = [f"{config}/{task}-*.parquet" for config in configs for task in tasks]
        snapshot = snapshot_download(BRIGHT_REPO, repo_type="dataset", revision=revision, allow_patterns=patterns)
    snapshot = Path(snapshot)
    found = {
        (task, config): sorted((snapshot / config).glob(f"{task}-*.parquet")) for task in tasks for config in configs
    }
    missing = [f"{config}/{task}-*.parquet" for (task, config), files in found.items() if not files]
    if missing:  # checked before anything is written, so a failed download leaves no half-filled folder
        raise FileNotFoundError(f"{snapshot}: no {', '.join(missing)} ({BRIGHT_REPO} at {revision})")
    manifests = {task: _task_manifest(Path(root) / task, revision) for task in tasks}
    for task in tasks:
        out = Path(root) / task
        out.mkdir(parents=True, exist_ok=True)
        manifest = manifests[task]
        for config in configs:
            files = found[task, config]
            rows = [row for file in files for row in pq.read_table(file).to_pylist()]
            write_text_atomic(
                out / f"{config}.jsonl", "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
            )
            manifest["files"][f"{config}.jsonl"] = {"config": config, "rows": len(rows)}
        (out / SOURCE_FILE).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        logger.info("BRIGHT %s (%s): %s", task, revision[:8], ", ".join(configs))
    return Path(root)


def main(argv: Sequence[str] | None = None) -> Path:
    """``python -m text_retrieval.data.download {bright,beir,sts,msmarco,allnli} ...``: the helpers from a shell."""
    parser = argparse.ArgumentParser(prog="python -m text_retrieval.data.download", description=__doc__)
    sources = parser.add_subparsers(dest="command", required=True)
    bright = sources.add_parser("bright", help="BRIGHT tasks from the Hugging Face Hub at a pinned revision")
    bright.add_argument("root", help="folder to write <task>/ folders into")
    bright.add_argument("--tasks", nargs="+", choices=BRIGHT_TASKS, metavar="TASK", help="default: all of the setting")
    bright.add_argument("--long-documents", action="store_true", help="long documents (StackExchange tasks, pony)")
    bright.add_argument(
        "--reasoning",
        nargs="+",
        default=[],
        choices=REASONING_CONFIGS,
        metavar="CONFIG",
        help=", ".join(REASONING_CONFIGS),
    )
    bright.add_argument("--revision", default=BRIGHT_REVISION, help="dataset revision (default: %(default)s)")
    bright.add_argument("--snapshot", default=None, help="convert this local copy of the hub repository instead")
    beir = sources.add_parser("beir", help="a BEIR dataset (zip from the BEIR mirror)")
    beir.add_argument("name", help="e.g. scifact, nfcorpus, fiqa, arguana, scidocs")
    beir.add_argument("root")
    sts = sources.add_parser("sts", help="an STS set")
    sts.add_argument("name", choices=sorted(STS_SOURCES))
    sts.add_argument("root")
    sts.add_argument("--source", default=None, help="the archive fetched by hand (e.g. Stsbenchmark.tar.gz)")
    training_download.add_parsers(sources)
    args = parser.parse_args(argv)
    setup_logging(level=logging.INFO)
    if args.command in training_download.COMMANDS:
        training_download.run(args)
        return Path(args.root)
    if args.command == "bright":
        return download_bright(args.root, args.tasks, args.long_documents, args.reasoning, args.revision, args.snapshot)
    if args.command == "beir":
        return download_beir(args.name, args.root)
    return download_sts(args.name, args.root, args.source)


if __name__ == "__main__":
    try:
        run_entry_point(main)
    except ConnectionError as err:  # offline: the message already says what to do
        sys.exit(f"error: {err}")
