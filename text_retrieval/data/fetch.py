"""The text front end's data fetchers: BEIR, BRIGHT, STS, MS MARCO and AllNLI into the local layouts
the loaders and trainers read (their command line: :mod:`text_retrieval.data.download`).

Network access is checked first with a short connection attempt
(:func:`clipmag.storage.fetch.check_online`), so an offline machine gets an immediate, explicit error
(with the URL to fetch by hand) instead of a long hang in a retry loop. BRIGHT and MS MARCO are
fetched at pinned dataset revisions, recorded next to the files. The training-set builders
(``training/msmarco.py``, ``training/msmarco_passage.py``, ``training/allnli.py``) convert local
copies; ``source`` hands them files fetched by hand, and without it they fetch into ``<root>/raw``
(a file already there is kept).
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from clipmag.storage.fetch import check_online, download, fetch_online, unpack
from clipmag.storage.files import write_text_atomic
from clipmag.storage.naming import check_folder_name
from text_retrieval.data.loaders.bright import (
    BRIGHT_REPO,
    BRIGHT_REVISION,
    BRIGHT_TASKS,
    LONG_DOCUMENT_TASKS,
    REASONING_CONFIGS,
    SOURCE_FILE,
)
from text_retrieval.data.training.allnli import SOURCES as NLI_SOURCES
from text_retrieval.data.training.allnli import build_allnli_sts
from text_retrieval.data.training.msmarco import MSMARCO_FILES, build_msmarco80k, msmarco_url
from text_retrieval.data.training.msmarco_passage import build_msmarco500k
from text_retrieval.data.training.write import BuildOptions

logger = logging.getLogger("clipmag")

__all__ = [
    "BEIR_URL",
    "STS_SOURCES",
    "download_allnli",
    "download_beir",
    "download_bright",
    "download_msmarco",
    "download_sts",
]

BEIR_URL = "https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets/{name}.zip"
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


def download_beir(name: str, root: str | Path, hint: str | None = None) -> Path:
    """Download and unpack BEIR dataset ``name`` (e.g. ``scifact``) into ``root/name``; ``hint``: what
    the offline error suggests instead."""
    root = Path(root)
    folder = root / check_folder_name(name, "BEIR data set")
    if (folder / "qrels").is_dir():
        logger.info("%s already present", folder)
        return folder
    with tempfile.TemporaryDirectory(dir=root if root.exists() else None) as tmp:
        url = BEIR_URL.format(name=name)
        check_online(url, hint=hint)
        archive = download(url, Path(tmp) / f"{name}.zip")
        unpack(archive, root)
    return folder


def download_msmarco(root: str | Path, size: str = "80k", source: str | Path | None = None, **build: Any) -> dict:
    """Build MS MARCO 80K (v1.1 QA, pinned revision) or 500K (BEIR's passage-ranking folder) in ``root``.

    ``source``: a local copy to convert instead of fetching into ``root/raw`` (80K: the hub layout
    ``v1.1/{train,validation}-*.parquet``; 500K: an unpacked BEIR ``msmarco`` folder). ``build``:
    the builder's options (seed, dev sizes, samples per shard, overwrite). Returns the manifest.
    """
    root = Path(root)
    if size == "80k":
        if source is None:
            files = " and ".join(MSMARCO_FILES.values())
            hint = f"download {files} on a connected machine and pass the folder holding v1.1/ as --source DIR"
            for file in MSMARCO_FILES.values():
                fetch_online(msmarco_url(file), root / "raw" / file, hint)
            source = root / "raw"
        return build_msmarco80k(source, root, BuildOptions(**build))
    if size != "500k":
        raise ValueError(f"unknown MS MARCO size {size!r}; known: 80k, 500k")
    if source is None:
        hint = f"fetch {BEIR_URL.format(name='msmarco')} on a connected machine, unzip it and pass --source msmarco/"
        source = download_beir("msmarco", root / "raw", hint)
    return build_msmarco500k(source, root, BuildOptions(**build))


def download_allnli(root: str | Path, source: str | Path | None = None) -> dict:
    """``root/train.tsv``: SNLI + MultiNLI + STS-B train pairs scored on [0, 1] (``allnli.py``).

    ``source``: a folder holding the three archives (or their unpacked files) fetched by hand;
    without it they are fetched into ``root/raw``. Returns the manifest.
    """
    root = Path(root)
    if source is None:
        names = ", ".join(spec.url for spec in NLI_SOURCES.values())
        hint = f"fetch {names} on a connected machine and pass their folder as --source DIR"
        for spec in NLI_SOURCES.values():
            fetch_online(spec.url, root / "raw" / spec.archive, hint)
        source = root / "raw"
    return build_allnli_sts(source, root / "train.tsv")
