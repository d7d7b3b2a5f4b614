"""What the deploy measurements share: models, data sets, one evaluation, and the results file.

Each evaluation is ``eval_text.py``'s own (``evaluate_retrieval`` under the evaluation settings it
uses: an export's recorded lengths, else the model's), with the corpus embeddings cached under
``--cache-dir`` so that every head and setting scores the same raw vectors. The results file names
the commit, the command and the settings (``clipmag.results.provenance``), the library versions and
the numerics, as every results file of the project does.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

import torch

from clipmag.results.provenance import code_state, provenance
from clipmag.results.record import encoding_numerics, package_versions
from clipmag.scoring.heads import SimilarityHead
from text_retrieval.data.loaders import EvalSettings, RetrievalDataset, load_beir
from text_retrieval.evaluation.evaluate import evaluate_retrieval
from text_retrieval.evaluation.records import model_label
from text_retrieval.model.encoder import TextEncoder
from text_retrieval.model.packaged import resolve_model_name
from text_retrieval.retrieval.encoding import with_export_lengths
from text_retrieval.retrieval.index import RetrievalSettings

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("CLIPMAG_SHARED_DATA", ROOT.parent / "shared" / "data"))
BEIR_SETS = ("scifact", "cranfield")
TOP_K = 100
PACKAGES = ("lancedb", "bm25s", "ranx")


def add_common_arguments(parser: argparse.ArgumentParser, output: str) -> None:
    parser.add_argument("--export", default=None, help="a fine-tuned dot-family export, measured beside MiniLM")
    parser.add_argument("--docs", type=int, default=None, help="a check on a subset: at most N documents a set")
    parser.add_argument("--queries", type=int, default=None, help="a check on a subset: the first N queries a set")
    parser.add_argument("--cache-dir", default="runs/deploy/cache", help="corpus embeddings, encoded once a model")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--output", default=output, help="the rows with their provenance (JSON)")


def models(export: str | None) -> list[str]:
    """all-MiniLM-L6-v2 (packaged), then the export when one is given."""
    if export and not Path(export).is_dir():
        raise SystemExit(f"error: --export {export}: no such folder (a clipmag export)")
    return [resolve_model_name("all-MiniLM-L6-v2"), *([export] if export else [])]


def label(model: str) -> str:
    """A model's name in the tables: all-MiniLM-L6-v2, or the export's run (``model_label``)."""
    return "all-MiniLM-L6-v2" if model == resolve_model_name("all-MiniLM-L6-v2") else model_label(model)


def load_encoder(model: str) -> TextEncoder:
    encoder = TextEncoder.from_pretrained(model)
    return encoder.to("cuda") if torch.cuda.is_available() else encoder


def beir_sets(docs: int | None, queries: int | None) -> list[RetrievalDataset]:
    """SciFact and Cranfield test splits (cut to a subset with ``docs`` / ``queries``, judged documents kept)."""
    sets = [load_beir(SHARED / "beir" / name, split="test") for name in BEIR_SETS]
    return [s.subset(queries, docs) if docs or queries else s for s in sets]


def evaluate(
    encoder: TextEncoder, head: SimilarityHead, dataset: RetrievalDataset, retrieval: RetrievalSettings, args: Any
) -> dict[str, Any]:
    """``eval_text.py``'s retrieval evaluation of ``dataset`` under ``head`` with ``retrieval``'s settings."""
    encoder.head = head
    settings = with_export_lengths(EvalSettings(), encoder)
    cache = ROOT / args.cache_dir
    return evaluate_retrieval(
        encoder, dataset, TOP_K, args.batch_size, cache, show_progress=False, settings=settings, retrieval=retrieval
    )


def code_at_start() -> dict[str, Any]:
    """The code a measurement runs, read once when it starts. The records of this folder do not
    count: the two tables are measured one after the other in one checkout (one encoding), and the
    first's fresh record must not make the second's tree read as dirty."""
    return code_state(("results/deploy",))


def write_rows(
    path: str, table: str, config: dict[str, Any], rows: list[dict[str, Any]], encoders: dict[str, TextEncoder]
) -> Path:
    """The results file: ``{"table", "provenance", "versions", "numerics", "weights", "rows"}``; ``encoders``
    by table label, whose weights fingerprints say which model each row's label was (two records
    share an fp32 score only where they share the weights, the CPU in ``numerics`` and the code)."""
    out = ROOT / path
    out.parent.mkdir(parents=True, exist_ok=True)
    last = list(encoders.values())[-1]
    record = {
        "table": table,
        "provenance": provenance(config, code_at_start()),
        "versions": package_versions(PACKAGES),
        "numerics": encoding_numerics(last.precision, last.device),
        "weights": {name: encoder.weights_fingerprint() for name, encoder in encoders.items()},
        "rows": rows,
    }
    out.write_text(json.dumps(record, indent=1, default=str) + "\n", encoding="utf-8")
    print(f"{len(rows)} rows written to {out}")
    return out
