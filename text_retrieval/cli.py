"""Run the text trainer end to end: train (one process or torchrun), then test and report."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Sequence

from clipmag import distributed as dist_utils
from clipmag.config import parse_cli
from clipmag.engine import train
from clipmag.run_logging import setup_logging
from text_retrieval.config import TEXT_SHORTHANDS, TextConfig
from text_retrieval.encoder import TextEncoder
from text_retrieval.task import TextRetrievalTask

DEFAULT_CONFIG = Path(__file__).resolve().parents[1] / "configs" / "text" / "default.yaml"
TABLE_KEYS = ("NDCG@10", "MRR@10", "Recall@100", "spearman", "spearman_reversed", "asymmetry_gap")


def format_results(results: dict[str, dict[str, Any]], head: str) -> str:
    """A small table: one row per test set, the metrics it has."""
    lines = [f"test results (head: {head})"]
    for name, result in results.items():
        cells = [f"{k} {result[k]:.4f}" for k in TABLE_KEYS if isinstance(result.get(k), float)]
        lines.append(f"  {name:<24} " + "  ".join(cells))
    return "\n".join(lines)


def main(argv: Sequence[str]) -> dict[str, dict[str, Any]]:
    cfg = parse_cli(TextConfig, argv, TEXT_SHORTHANDS, default_config=DEFAULT_CONFIG)
    ctx = dist_utils.init_distributed(cfg.train.device)
    setup_logging(cfg.train.output_dir, ctx.rank)
    try:
        task = TextRetrievalTask(cfg, ctx)
        trainer_start = time.perf_counter()
        final_validation = train(task, cfg.train, cfg.optim, cfg, ctx)
        results: dict[str, dict[str, Any]] = {}
        if ctx.is_main:
            # Test what ships: the exported folder, reloaded with its clipmag_head.json.
            encoder = TextEncoder.from_pretrained(Path(cfg.train.output_dir) / "export").to(ctx.device)
            results = task.test(encoder)
            summary = {name: {k: v for k, v in r.items() if k != "per_query"} for name, r in results.items()}
            out = {"head": encoder.head.to_dict(), "validation": final_validation, "test": summary,
                   "train_seconds": time.perf_counter() - trainer_start}
            (Path(cfg.train.output_dir) / "results.json").write_text(json.dumps(out, indent=1, default=str))
            print(format_results(results, cfg.head.name), flush=True)
        return results
    finally:
        dist_utils.cleanup()
