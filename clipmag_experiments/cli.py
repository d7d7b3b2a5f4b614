"""Command lines of the experiment tools: ``clipmag-sweep``, ``clipmag-report``, ``clipmag-demo``.

The ``scripts/sweep.py``, ``scripts/report.py`` and ``scripts/demo.py`` wrappers call these, so
the README commands and the console scripts behave the same from any directory. All three take the
trainers' command-line style (:mod:`clipmag.config.command_line`): the sweep's keys as ``key=value``
(``output_dir=runs/demo-fp32``), a few flags, ``--help`` listing both.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from clipmag.config.checks import Fraction
from clipmag.config.command_line import field_flags, parse_cli, parse_cli_and_file
from clipmag.config.entry import run_entry_point
from clipmag.errors import ConfigError
from clipmag.registry.config_packages import config_path
from clipmag.registry.evaluations import get_evaluation
from clipmag.results.record import RESULTS_FILE
from clipmag.runtime.logs import setup_logging
from clipmag_experiments.design.grid import SweepConfig
from clipmag_experiments.design.selection import check_only

DEMO_SWEEP = "configs/sweeps/demo.yaml"
DEMO_PREDICTOR_MODEL = "all-MiniLM-L6-v2"  # the demo's start, judged before fine-tuning


@dataclass
class SweepCommand(SweepConfig):
    """A sweep (its YAML is ``--config``) and ``only``: the groups to run, one model's cells of a
    group as ``group/model`` or one head's as ``group/model/head`` (empty: all)."""

    only: list[str] = field(default_factory=list)


SWEEP_FLAGS = {"only": "only", "output": "output_dir", "pack": "pack"}


@dataclass
class PlanCommand(SweepCommand):
    """A sweep's cost plan: ``device`` one of clipmag.runtime.devices (h100, a100, ...) and the model
    FLOP ``utilisation`` a run reaches on it (0.3-0.5 is usual for encoders in bf16)."""

    device: str = "h100"
    utilisation: Fraction = 0.4


@dataclass
class ReportCommand:
    """``runs_dir``: a sweep's ``output_dir``; ``title``: the report's first heading; ``allow_mixed``:
    build even when the cells come from several commits, a dirty tree or code that recorded none."""

    runs_dir: str = ""
    title: str = "clipmag sweep report"
    allow_mixed: bool = False


def sweep_main(argv: Sequence[str]) -> None:
    """Run a sweep: a grid of heads x seeds x models (x variants) for the text or image-text trainer,
    each cell in its own run folder under the sweep's ``output_dir``, with the evaluations its groups
    attach. Every cell's arguments are checked before the first one trains; finished cells are
    skipped, so rerunning the same command resumes. ``status`` says where every cell stands and
    ``plan`` what the sweep costs (steps, FLOPs, GPU-hours, memory), running nothing.

    Examples:
        clipmag-sweep --config configs/sweeps/demo.yaml --only code-search
        clipmag-sweep status --config configs/sweeps/paper_text.yaml
        clipmag-sweep plan --config configs/sweeps/paper_text.yaml --device h100 --utilisation 0.4"""
    if argv and argv[0] == "status":
        cmd, _ = parse_cli_and_file(SweepCommand, argv[1:], SWEEP_FLAGS, description=sweep_main.__doc__)
        from clipmag_experiments.sweep.status import sweep_status

        check_only(cmd, cmd.only, source="command line")
        print(sweep_status(cmd, cmd.only))
        return
    if argv and argv[0] == "plan":
        flags = {**SWEEP_FLAGS, "device": "device", "utilisation": "utilisation"}
        plan, _ = parse_cli_and_file(PlanCommand, argv[1:], flags, description=sweep_main.__doc__)
        from clipmag.runtime.devices import device_named
        from clipmag_experiments.sweep.plan import plan_sweep

        check_only(plan, plan.only, source="command line")
        print(plan_sweep(plan, device_named(plan.device), plan.utilisation, plan.only))
        return
    cmd, source = parse_cli_and_file(SweepCommand, argv, SWEEP_FLAGS, description=sweep_main.__doc__)
    if not cmd.groups:
        raise ConfigError("command line: the sweep has no groups; give its YAML with --config (see --help)")
    from clipmag_experiments.sweep.run import run_sweep  # the trainers' core: only once a sweep runs

    setup_logging(cmd.output_dir, hold=True)  # out.log once run_sweep accepts the folder
    run_sweep(cmd, cmd.only, source=source or "the command line")


def report_main(argv: Sequence[str]) -> Path | None:
    """Collect a finished (or partly finished) sweep's runs into ``RUNS_DIR/report.md``: per-head
    tables of the test metrics with the change against cosine and paired significance tests
    (markdown and CSV), the learned gammas, the predictor's verdict when the sweep ran it, and
    figures. Refuses cells from several commits or a dirty tree unless ``--allow-mixed``.
    ``clipmag-report docs [--files FILE ...] [--results results] [--check]`` renders the manuals'
    marked results blocks from ``results/`` instead (``--check``: change nothing, exit 1 if stale).

    Examples:
        clipmag-report runs/demo
        clipmag-report runs/paper_text --title "Heads on BEIR and BRIGHT" --allow-mixed
        clipmag-report docs --check"""
    if argv and argv[0] == "docs":
        from clipmag_experiments.manuals.sync import docs_main

        status = docs_main(argv[1:])
        if status:
            raise SystemExit(status)
        return None
    cmd = parse_cli(
        ReportCommand, argv, field_flags(ReportCommand), description=report_main.__doc__, positional="runs_dir"
    )
    if not cmd.runs_dir:
        raise ConfigError("command line: give the sweep's output folder (clipmag-report RUNS_DIR)")
    from clipmag_experiments.report import build_report

    path = build_report(cmd.runs_dir, cmd.title, cmd.allow_mixed)
    print(path.read_text().split("## Figures")[0])
    print(f"report: {path}")
    return path


def demo_main(argv: Sequence[str]) -> Path:
    """The main job on the bundled defaults: head sweeps (text retrieval in and out of domain, the
    symmetric STS-style task, CLIP in both directions), the qnorm/dnorm predictor, then report.md,
    all offline on a CPU. The packaged demo sweep (``configs/sweeps/demo.yaml``) is the default;
    ``--config FILE`` and ``key=value`` change the keys they hold. Rerunning resumes.

    Examples:
        clipmag-demo
        clipmag-demo --output runs/demo-fp32 'args=[train.precision=fp32]'"""
    start = time.perf_counter()
    cfg, source = parse_cli_and_file(
        SweepConfig, argv, {"output": "output_dir"}, config_path(DEMO_SWEEP), demo_main.__doc__
    )
    from clipmag_experiments.report import build_report
    from clipmag_experiments.report.build import PREDICTIONS_FILE
    from clipmag_experiments.sweep.run import run_sweep

    setup_logging(cfg.output_dir, hold=True)
    run_sweep(cfg, source=source or DEMO_SWEEP)
    predictions = Path(cfg.output_dir) / PREDICTIONS_FILE
    if not predictions.is_file():  # the text front end's predictors, by their registered name
        folder = Path(cfg.output_dir) / "predictor"
        get_evaluation("predict").run(Path(DEMO_PREDICTOR_MODEL), folder, ["--data", "bundled", "--n-pairs", "128"])
        shutil.copyfile(folder / RESULTS_FILE, predictions)
    # a user who edited the code still gets the demo's report; its Code lines say the tree was dirty
    report = build_report(cfg.output_dir, "clipmag demo: the five heads on the bundled defaults", allow_mixed=True)
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
