"""Recall@10 at 100,000 documents for trained exports: each head's export in faiss HNSW and IVF under
the layouts docs/deploy.md discusses, and in LanceDB and Qdrant's local mode at their index settings,
with the untrained model as the control.

``benchmarks/ann_trained.yaml`` names the exports (a qnorm, dnorm, dot and learnable fine-tune of
all-MiniLM-L6-v2 by ``scripts/train_text.py``), the corpus size and the search-time settings:

* ``train`` trains every export whose folder holds none yet (``train.resume=latest``: an interrupted
  training continues); minutes each on 2 cores, alone;
* ``measure`` encodes ``bench_ann_scale.py``'s corpus (functions of site-packages, docstring
  summaries as queries) with the control and each export, applies the heads - an export's own head
  (learned gammas included) and cosine of the same embeddings; the control's every head - and
  measures recall@10 against exact search of the same stored vectors, per store, index, layout and
  knob (``store_indexes.py``): faiss ``ip`` and ``mips-l2`` (the MIPS-to-L2 reduction, for heads whose
  documents keep their norm) in HNSW and IVF, IVF also at clipmag's default probe count; LanceDB
  ``"dot"`` exact and under each index type; Qdrant local ``Dot``. Each model's rows are kept under
  ``RUNS/parts`` as it finishes, so a rerun measures only what is missing;
* ``all`` does both.

    python benchmarks/bench_ann_trained.py train
    python benchmarks/bench_ann_trained.py measure --output results/deploy/ann_trained.json   # alone
    python benchmarks/bench_ann_trained.py all --docs 300 --queries 20 --runs runs/ann_trained-check \\
        --train-override train.steps=2 --output runs/ann_trained-check/record.json           # a check
"""

from __future__ import annotations

import argparse
import functools
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml
from bench_ann_scale import LAYOUTS, K, corpus_and_queries, encode_both, exact_top, fingerprint, recall, stored
from harness import ROOT, code_at_start, load_average, measured_part, print_header, write_record
from store_indexes import StoreIndex, build_index

from clipmag.scoring.head_record import HEAD_FILE
from clipmag.scoring.heads import SimilarityHead, build_head, every_head
from text_retrieval.model.encoder import TextEncoder
from text_retrieval.model.packaged import resolve_model_name

CONFIG = Path(__file__).with_name("ann_trained.yaml")
LAYOUT_METRIC = {"ip": "ip", "mips-l2": "l2"}  # each layout's metric in store_indexes.py


def read_config(path: Path) -> dict[str, Any]:
    """The benchmark's settings; a missing key is named with the file."""
    config = yaml.safe_load(path.read_text(encoding="utf-8"))
    for key in ("runs", "documents", "queries", "max_length", "control", "exports", "stores"):
        if key not in (config or {}):
            raise SystemExit(f"error: {path}: no {key!r}; see benchmarks/ann_trained.yaml")
    return config


def export_folder(runs: Path, name: str) -> Path:
    return runs / name / "export"


def train(config: dict[str, Any], runs: Path, overrides: list[str]) -> None:
    """Train every export that is not there yet, one after another (each continues where it stopped)."""
    for name, arguments in config["exports"].items():
        if (export_folder(runs, name) / HEAD_FILE).is_file():
            print(f"  {name}: {export_folder(runs, name)} is there", flush=True)
            continue
        argv = ["scripts/train_text.py", *map(str, arguments), *overrides, "train.resume=latest"]
        argv += ["--output", str(runs / name)]
        print(f"  {name}: python {' '.join(argv)}", flush=True)
        subprocess.run([sys.executable, *argv], cwd=ROOT, check=True)


def heads_of(encoder: TextEncoder, trained: bool) -> dict[str, SimilarityHead]:
    """An export's own head and cosine of the same embeddings; every head for the untrained control."""
    if not trained:
        return every_head(encoder.head)
    return {encoder.head.name: encoder.head, "cosine": build_head("cosine")}


def search_values(store: str, kind: str, listed: list[Any], built: StoreIndex) -> list[Any]:
    """The configured knob values, with clipmag's default added for faiss (``ann.py``'s efSearch / nprobe)."""
    values = list(listed)
    if store == "faiss" and built.default is not None and built.default not in values:
        values = sorted([*values, built.default])
    return values


def measure_model(
    label: str, encoder: TextEncoder, trained: bool, docs: np.ndarray, queries: np.ndarray, stores: dict
) -> list[dict[str, Any]]:
    """Recall@10 of every head, store, index, layout and knob for one model's embeddings. Heads whose
    stored documents are alike (dot and qnorm: raw) share their indexes."""
    rows, built = [], {}
    for name, head in heads_of(encoder, trained).items():
        gq, gd = head.gammas()
        for layout, metric in LAYOUT_METRIC.items():
            if layout == "mips-l2" and gd == 1.0:
                continue  # unit documents: the reduction would add a zero coordinate
            side_d, side_q = stored(head, docs, queries, layout)
            truth = exact_top(side_d, side_q, LAYOUTS[layout])
            for store, kinds in stores.items():
                if store != "faiss" and layout != "ip":
                    continue  # the embedded stores are measured under their inner-product setting
                for kind, listed in kinds.items():
                    key = (store, kind, gd, layout)
                    if key not in built:
                        built[key] = build_index(store, kind, metric, side_d)
                    index = built[key]
                    for value in search_values(store, kind, listed, index):
                        found = index.search(side_q, K, value)
                        row = {"model": label, "head": name, "gq": gq, "gd": gd, "store": store, "index": kind}
                        row.update(layout=layout, knob=index.knob, value=value, default=value == index.default)
                        row.update(recall=recall(found, truth), build_s=index.build_s, **index.described)
                        rows.append(row)
                        print(
                            f"    {label} {name:<9} {layout:<7} {store:<12} {kind:<11} "
                            f"{index.knob or '-'} {value}: recall@10 {row['recall']:.3f}",
                            flush=True,
                        )
    return rows


def models(config: dict[str, Any], runs: Path) -> list[tuple[str, str, bool]]:
    """(label, model path, trained) for the control, then every export (each must be trained)."""
    found = [(Path(config["control"]).name, resolve_model_name(config["control"]), False)]
    for name in config["exports"]:
        folder = export_folder(runs, name)
        if not (folder / HEAD_FILE).is_file():
            raise SystemExit(
                f"error: {folder}: no export; train it first (python benchmarks/bench_ann_trained.py train)"
            )
        found.append((name, str(folder), True))
    return found


def _encode_and_measure(
    label: str, encoder: TextEncoder, trained: bool, sides: tuple, stores: dict[str, Any]
) -> dict[str, Any]:
    """One model's part: its corpus and queries encoded (``sides``: texts, queries, cache, batch
    size; the corpus through the cache), then :func:`measure_model`."""
    docs, queries = encode_both(encoder, *sides)
    return {"head": encoder.head.to_dict(), "rows": measure_model(label, encoder, trained, docs, queries, stores)}


def measure(config: dict[str, Any], runs: Path, args: argparse.Namespace) -> None:
    functions, query_texts = corpus_and_queries(config["documents"], config["queries"])
    texts = [fn.code for fn in functions]
    corpus = {"documents": len(texts), "queries": len(query_texts), "fingerprint": fingerprint(texts)}
    rows, described = [], []
    for label, path, trained in models(config, runs):
        encoder = TextEncoder.from_pretrained(path, max_length=config["max_length"])
        identity = {"corpus": corpus, "weights": encoder.weights_fingerprint(), "stores": config["stores"]}
        sides = (texts, query_texts, runs / "cache", args.batch_size)
        measure_now = functools.partial(_encode_and_measure, label, encoder, trained, sides, config["stores"])
        done = measured_part(runs / "parts" / f"{label}.json", identity, measure_now)
        rows += done["rows"]
        described.append({"label": label, "trained": trained, "head": done["head"], "weights": identity["weights"]})
    print(f"\n  load average at end (1 / 5 / 15 min): {load_average()}")
    figures = {"models": described, "corpus": corpus, "k": K, "rows": rows}
    write_record(ROOT / args.output, "ann_trained", args, figures, leave_out=("config", "runs", "train_override"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=("train", "measure", "all"))
    parser.add_argument("--config", default=str(CONFIG), help="the exports and settings (YAML)")
    parser.add_argument("--runs", default=None, help="exports, cache and parts (default: the config's runs)")
    parser.add_argument("--docs", type=int, default=None, help="documents (default: the config's)")
    parser.add_argument("--queries", type=int, default=None, help="queries (default: the config's)")
    parser.add_argument("--train-override", nargs="*", default=[], help="KEY=VALUE added to every training")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--output", default="runs/ann_trained/record.json", help="the record (JSON)")
    args = parser.parse_args()
    config = read_config(Path(args.config))
    config.update({k: v for k, v in (("documents", args.docs), ("queries", args.queries)) if v is not None})
    args.docs, args.queries, args.max_length = config["documents"], config["queries"], config["max_length"]
    runs = ROOT / (args.runs or config["runs"])
    torch.set_num_threads(args.threads)
    code_at_start()
    print_header("Recall@10 per head, store and index at scale for trained exports, the untrained model as control")
    if args.step in ("train", "all"):
        train(config, runs, args.train_override)
    if args.step in ("measure", "all"):
        import faiss

        faiss.omp_set_num_threads(args.threads)
        measure(config, runs, args)


if __name__ == "__main__":
    main()
