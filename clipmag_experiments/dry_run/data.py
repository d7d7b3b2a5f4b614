"""What a dry run of the paper's configs reads, built the way a researcher builds the real thing.

Stand-in *sources* in the published layouts (``standin_training_sets``, ``standin_test_sets`` and
``standin_coco`` beside this module) go under ``raw/`` (or ``data/raw/coco``, where the
COCO config says), and the project's own builders turn them into the paths the paper configs name,
with the commands of docs/experiments.md plus ``--source`` / ``--snapshot``:

    python -m text_retrieval.data.download msmarco data/msmarco80k --source raw/ms_marco
    python -m text_retrieval.data.download allnli data/sts --source raw/nli
    python -m text_retrieval.data.download sts stsbenchmark data/sts --source raw/nli/Stsbenchmark.tar.gz
    python -m text_retrieval.data.download bright data/bright --snapshot raw/bright [--long-documents]
    python scripts/make_clip_shards.py --output data/coco --images data/raw/coco --karpathy .../dataset_coco.json

BEIR and DPR need no builder (their files are used as published), so their stand-ins are written
in place. Tiny models stand in for the hub models (:data:`STANDIN_MODELS`), under ``models/<hub
name>``. Every step is skipped when what it creates exists, so a rerun goes straight to the cells.
Paths are relative to the dry run's root, the current directory while it runs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from clipmag.errors import ConfigError
from clipmag.runtime.logs import logger
from clipmag_experiments.design.prepare import SweepStep, run_prepare
from clipmag_experiments.dry_run.standin_coco import write_karpathy_coco
from clipmag_experiments.dry_run.standin_models import write_tiny_decoder, write_tiny_encoder, write_tiny_reader
from clipmag_experiments.dry_run.standin_test_sets import write_beir, write_bright_hub, write_dpr
from clipmag_experiments.dry_run.standin_training_sets import write_msmarco_v11, write_nli_archives

__all__ = ["STANDIN_MODELS", "BEIR_SETS", "standin_model", "prepare"]

# hub model -> the tiny model of its family that stands in for it (CLIP: an open_clip config name)
STANDIN_MODELS: dict[str, Callable[[Path], object] | str] = {
    "facebook/contriever": lambda folder: write_tiny_encoder(folder, seed=1),
    "Shitao/RetroMAE": lambda folder: write_tiny_encoder(folder, seed=2),
    "intfloat/e5-base-unsupervised": lambda folder: write_tiny_encoder(folder, seed=3),
    "intfloat/e5-mistral-7b-instruct": write_tiny_decoder,
    "Qwen/Qwen3-8B-Base": lambda folder: write_tiny_decoder(folder, family="qwen3"),
    "google/flan-t5-large": write_tiny_reader,
    "ViT-B-32": "clipmag-tiny",
}
BEIR_SETS = ("scifact", "nfcorpus", "fiqa", "arguana", "scidocs")
DOWNLOAD = "text_retrieval.data.download"
MSMARCO_SIZES = ["--dev-queries", "20", "--dev-corpus", "150", "--samples-per-shard", "25"]


def standin_model(name: str) -> str:
    """The stand-in for hub model ``name`` (built on first use): a folder, or an open_clip config name."""
    if name not in STANDIN_MODELS:
        known = ", ".join(STANDIN_MODELS)
        raise ConfigError(
            f"the dry run has no stand-in for model {name!r} (it has: {known}); add one to STANDIN_MODELS"
        )
    writer = STANDIN_MODELS[name]
    if isinstance(writer, str):
        return writer
    folder = Path("models") / name
    if not (folder / "config.json").is_file():
        logger.info("stand-in model for %s -> %s", name, folder)
        writer(folder)
    return str(folder)


def _write(creates: str, writer: Callable[[], object]) -> None:
    if Path(creates).exists():
        logger.info("stand-in %s exists, kept", creates)
    else:
        logger.info("stand-in %s", creates)
        writer()


def _retrieval_sets() -> list[SweepStep]:
    """MS MARCO 80K (pairs, shards, dev), the five BEIR sets and BRIGHT in both document settings."""
    _write("raw/ms_marco/v1.1", lambda: write_msmarco_v11("raw/ms_marco"))
    for seed, name in enumerate(BEIR_SETS):
        _write(f"data/beir/{name}", lambda name=name, seed=seed: write_beir(f"data/beir/{name}", seed=seed))
    _write("raw/bright", lambda: write_bright_hub("raw/bright"))
    bright = ["bright", "data/bright", "--snapshot", "raw/bright"]
    return [
        SweepStep(
            "msmarco80k",
            DOWNLOAD,
            ["msmarco", "data/msmarco80k", "--source", "raw/ms_marco", *MSMARCO_SIZES],
            creates="data/msmarco80k/manifest.json",
        ),
        SweepStep("bright", DOWNLOAD, bright, creates="data/bright/biology/documents.jsonl"),
        SweepStep(
            "bright-long", DOWNLOAD, [*bright, "--long-documents"], creates="data/bright/pony/long_documents.jsonl"
        ),
    ]


def _sts_sets() -> list[SweepStep]:
    _write("raw/nli", lambda: write_nli_archives("raw/nli"))
    return [
        SweepStep("allnli", DOWNLOAD, ["allnli", "data/sts", "--source", "raw/nli"], creates="data/sts/train.tsv"),
        SweepStep(
            "stsbenchmark",
            DOWNLOAD,
            ["sts", "stsbenchmark", "data/sts", "--source", "raw/nli/Stsbenchmark.tar.gz"],
            creates="data/sts/stsbenchmark/sts-test.csv",
        ),
    ]


def _coco() -> list[SweepStep]:
    _write("data/raw/coco/dataset_coco.json", lambda: write_karpathy_coco("data/raw/coco"))
    args = ["--output", "data/coco", "--images", "data/raw/coco", "--karpathy", "data/raw/coco/dataset_coco.json"]
    return [SweepStep("coco-shards", "image_text.data.shards_cli", args, creates="data/coco/splits.json")]


def _dpr() -> list[SweepStep]:
    _write("data/dpr/psgs_w100.tsv", lambda: write_dpr("data"))
    return []


PARTS: dict[str, tuple[Callable[[], list[SweepStep]], ...]] = {
    "text": (_retrieval_sets,),
    "sts": (_sts_sets,),
    "clip": (_coco,),
    "rag": (_retrieval_sets, _dpr),
}


def prepare(parts: list[str]) -> None:
    """Write the stand-ins the ``parts`` read and run the builders on them (each step once)."""
    steps: dict[str, SweepStep] = {}
    for part in parts:
        for source in PARTS[part]:
            steps.update((step.name, step) for step in source())
    run_prepare(list(steps.values()))
