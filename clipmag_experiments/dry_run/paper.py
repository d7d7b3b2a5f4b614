"""A dry run of every paper config on CPU, so that a run booked on GPUs meets no missing file and no
config error, on its first step or after its last.

    python scripts/paper_dry_run.py [--only text sts clip rag] [--root runs/paper-dry-run] [--full]

It works inside ``root`` (the current directory while it runs), so every relative path the paper
configs name (``data/msmarco80k/shards``, ``runs/paper/text/contriever/default/qnorm/seed0/export``)
resolves there as it does in a checkout, and the configs are read unchanged:

1. stand-in sources in the published layouts, turned by the real builders into those paths, and
   tiny models in place of the hub models (:mod:`clipmag_experiments.dry_run.data`);
2. every cell of the planned sweeps checked (:mod:`clipmag_experiments.dry_run.plan`), then the
   paper sweeps, each cell two steps under torchrun with 2 gloo processes, with the paper RAG
   configs attached to the contriever cells;
3. the paper RAG configs run as a researcher runs them (the exports they name plus BM25, a tiny
   T5 reading in place of Flan-T5), and the evaluation settings files no trainer's ``data.test``
   names, as their headers run them;
4. the sweep report over ``runs/paper`` (the tables of the parts run must be in it) and
   ``coverage.md``: every paper config and what ran it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from clipmag.config.build import load_yaml
from clipmag.config.command_line import parse_cli
from clipmag.config.entry import run_entry_point
from clipmag.runtime.logs import caller_logging_kept, setup_logging
from clipmag_experiments.cli import report_main
from clipmag_experiments.design.expansion import expand
from clipmag_experiments.dry_run.data import prepare, standin_model
from clipmag_experiments.dry_run.plan import (
    EVAL_RUNS,
    PARTS,
    RAG_CONFIGS,
    SWEEPS,
    coverage,
    coverage_table,
    eval_output,
    plan,
)
from clipmag_experiments.sweep.run import check_cells, run_sweep

__all__ = ["DryRunCommand", "REPORT_TABLES", "dry_run", "main", "entry"]

PAPER_RUNS = "runs/paper"
REPORT_TABLES = {
    "text": ["## Retrieval (test splits)", "## BRIGHT: plain mean over its tasks"],
    "sts": ["## Symmetric task (STS-style)"],
    "clip": ["## CLIP: head-aware retrieval in both directions"],
    "rag": ["## Evaluations of the exports (RAG)"],
}
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


@dataclass
class DryRunCommand:
    """``root``: the folder it works in; ``only``: the parts to run (empty: all); ``full``: every head
    and variant of every group instead of the dry run's subset."""

    root: str = "runs/paper-dry-run"
    only: list[Literal["text", "sts", "clip", "rag"]] = field(default_factory=list)
    full: bool = False


@contextmanager
def inside(folder: Path) -> Iterator[None]:
    """Work in ``folder`` (created), so the configs' relative paths resolve there; then come back."""
    previous = Path.cwd()
    folder.mkdir(parents=True, exist_ok=True)
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(previous)


def _run_rag_configs() -> None:
    """Each paper RAG config as configured, a stand-in reading; skipped once its table exists."""
    from text_retrieval.rag.cli import main as rag_main

    for config in RAG_CONFIGS:
        settings = load_yaml(config)
        if not (Path(settings["output"]) / "table.md").is_file():
            with caller_logging_kept():
                rag_main(["--config", config, "--reader", standin_model(settings["reader"]["name_or_path"]), "--quiet"])


def _run_eval_configs() -> None:
    """The settings files of :data:`EVAL_RUNS`, each with a stand-in for the model its header names."""
    from text_retrieval.evaluation.cli import main as eval_main

    for config, (model, extra) in EVAL_RUNS.items():
        with caller_logging_kept():
            eval_main(
                ["--model", standin_model(model), "--data", config, *extra, "--output", eval_output(config), "--quiet"]
            )


def dry_run(cmd: DryRunCommand) -> Path:
    """Run the dry run of ``cmd``'s parts; returns the report. Raises when a report table is missing."""
    parts = [p for p in PARTS if not cmd.only or p in cmd.only]
    for name, value in OFFLINE.items():
        os.environ.setdefault(name, value)  # a dry run never fetches
    start = time.perf_counter()
    with inside(Path(cmd.root)):
        setup_logging(".")
        sweeps = plan(parts, cmd.full)
        for sweep in sweeps:  # every cell of every sweep, before anything is built or trained
            check_cells([c for c in expand(sweep.cfg) if not sweep.only or c.group in sweep.only], sweep.path)
        prepare(parts)
        for sweep in sweeps:
            run_sweep(sweep.cfg, sweep.only, source=sweep.path)
            if sweep.path == SWEEPS["text"] and "text" in parts:
                _run_eval_configs()
        if "rag" in parts:
            _run_rag_configs()
        title = "Dry run of the paper's configs (stand-in data, tiny models)"
        report = report_main([PAPER_RUNS, "--title", title, "--allow-mixed"])  # a rehearsal: any tree
        table = coverage_table(coverage(sweeps, parts), parts)
        Path("coverage.md").write_text(table)
        print(table)
        missing = [t for p in parts for t in REPORT_TABLES[p] if t not in report.read_text()]
        report = report.resolve()
    if missing:
        raise ValueError(f"{report}: the dry run's report lacks {', '.join(missing)}")
    minutes = (time.perf_counter() - start) / 60
    print(
        f"paper dry run ({', '.join(parts)}) finished in {minutes:.1f} min: {report}; {Path(cmd.root) / 'coverage.md'}"
    )
    return report


def main(argv: Sequence[str]) -> Path:
    """Dry-run the paper's configs on CPU: stand-in data, tiny models, two steps per cell, the report."""
    return dry_run(
        parse_cli(DryRunCommand, argv, {"root": "root", "only": "only", "full": "full"}, description=__doc__)
    )


def entry() -> None:
    """``scripts/paper_dry_run.py``: user errors end with one ``error:`` line."""
    run_entry_point(main)
