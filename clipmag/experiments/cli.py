"""Command lines of the experiment tools: ``clipmag-sweep``, ``clipmag-report``, ``clipmag-demo``.

The ``scripts/sweep.py``, ``scripts/report.py`` and ``scripts/demo.py`` wrappers call these, so
the README commands and the console scripts behave the same from any directory.
"""

from __future__ import annotations

import argparse
import shutil
import time
from collections.abc import Sequence
from pathlib import Path

from clipmag.entry import run_entry_point
from clipmag.evaluations import get_evaluation
from clipmag.experiments.report import build_report
from clipmag.experiments.report.build import PREDICTIONS_FILE
from clipmag.experiments.sweep import load_sweep_config, run_sweep
from clipmag.resources import config_path
from clipmag.results import RESULTS_FILE
from clipmag.run_logging import setup_logging

DEMO_SWEEP = "configs/sweeps/demo.yaml"
DEMO_PREDICTOR_MODEL = "all-MiniLM-L6-v2"  # the demo's start, judged before fine-tuning


def sweep_main(argv: Sequence[str]) -> None:
    """Run a grid of heads x seeds x models; finished cells are skipped, so rerunning resumes."""
    parser = argparse.ArgumentParser(prog="clipmag-sweep", description=sweep_main.__doc__)
    parser.add_argument("--config", required=True, help="sweep YAML (e.g. configs/sweeps/demo.yaml)")
    parser.add_argument("--only", nargs="*", default=[], help="run only these groups")
    parser.add_argument("overrides", nargs="*", help="dotted key=value overrides of the sweep config")
    args = parser.parse_args(argv)
    cfg = load_sweep_config(args.config, args.overrides)
    setup_logging(cfg.output_dir)
    run_sweep(cfg, args.only)


def report_main(argv: Sequence[str]) -> Path:
    """Collect a sweep's runs into report.md with tables (markdown + CSV) and figures."""
    parser = argparse.ArgumentParser(prog="clipmag-report", description=report_main.__doc__)
    parser.add_argument("runs_dir", help="a sweep's output_dir")
    parser.add_argument("--title", default="clipmag sweep report")
    args = parser.parse_args(argv)
    path = build_report(args.runs_dir, args.title)
    print(path.read_text().split("## Figures")[0])
    print(f"report: {path}")
    return path


def demo_main(argv: Sequence[str]) -> Path:
    """The main job on the embedded defaults: head sweeps (text retrieval in and out of domain, the
    symmetric STS-style task, CLIP in both directions), the qnorm/dnorm predictor, then report.md."""
    parser = argparse.ArgumentParser(prog="clipmag-demo", description=demo_main.__doc__)
    parser.add_argument("--config", default=DEMO_SWEEP, help="sweep YAML (default: the packaged demo sweep)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    cfg = load_sweep_config(config_path(args.config))
    setup_logging(cfg.output_dir)
    run_sweep(cfg)
    predictions = Path(cfg.output_dir) / PREDICTIONS_FILE
    if not predictions.is_file():  # the text front end's predictors, by their registered name
        folder = Path(cfg.output_dir) / "predictor"
        get_evaluation("predict").run(Path(DEMO_PREDICTOR_MODEL), folder, ["--data", "embedded", "--n-pairs", "128"])
        shutil.copyfile(folder / RESULTS_FILE, predictions)
    report = build_report(cfg.output_dir, "clipmag demo: the five heads on the embedded defaults")
    print(report.read_text().split("## Figures")[0])
    print(f"demo finished in {(time.perf_counter() - start) / 60:.1f} min; report: {report.resolve()}")
    return report


def sweep_entry() -> None:
    """Console script ``clipmag-sweep``."""
    run_entry_point(sweep_main)


def report_entry() -> None:
    """Console script ``clipmag-report``."""
    run_entry_point(report_main)


def demo_entry() -> None:
    """Console script ``clipmag-demo``."""
    run_entry_point(demo_main)
