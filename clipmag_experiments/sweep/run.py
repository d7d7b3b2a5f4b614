"""Head sweeps: a grid of heads x seeds x models (x named variants) for the text or CLIP trainer.

Each cell trains in its own run folder, ``<output_dir>/<group>/<model>/<head or variant>/seed<N>``,
with its resolved config. A cell is finished when its ``results.json`` parses, belongs to the cell
(head, seed) and names a tested model that exists (:mod:`clipmag_experiments.cells.finished`); a rerun of
the same sweep skips finished cells, runs the others again (saying why) and continues an
interrupted cell from its latest checkpoint, so a killed sweep resumes where it stopped. Cells run
one after another in this process (cheap on a laptop: the libraries are imported once), each
under ``torchrun`` with ``nproc_per_node``, or each as a job of a SLURM cluster
(:mod:`clipmag_experiments.slurm.launcher`); ``pack: N`` runs up to N local cells at once, each in
its own process on its share of the threads (:mod:`clipmag_experiments.sweep.packing`).

A cell that fails does not stop the sweep, as one job of a SLURM array stops none of the others:
one line names the cell and its log (:mod:`clipmag_experiments.sweep.cell_log`), the other cells run,
and the sweep ends with :class:`~clipmag_experiments.slurm.jobs.SweepUnfinished` naming every
failed cell. Ctrl-C stops it. A cell whose run diverged (its trainer's ``diverged.json``) has an
outcome: a choice reads it as a setting that does not train, and a rerun of the sweep does not run
it again (the same arguments and seed would diverge again) until that file is removed.

A sweep may first prepare what its groups read (``prepare``: data builders, a model folder): each
step runs a module's ``main(argv)`` unless the file it ``creates`` exists. A group (or step) that
``requires`` paths which are absent is skipped with one line naming them, so an optional data set
(e.g. a BEIR set under ``data/beir``) never stops the rest of a sweep. A ``models`` entry ``label=path`` names
the model ``label`` in run folders and reports (e.g. another group's export).

A group may continue an earlier group's cells (``continue_from``: each cell trains on from the final
checkpoint of the cell at the same place, :mod:`clipmag_experiments.cells.continuation`), so budgets
observed along one long run cost the longest alone.

A group may attach evaluations (:mod:`clipmag.registry.evaluations`, e.g. ``rag``) to its cells: each runs
on the cell's export once the cell is finished, in ``<cell>/evaluations/<name>``, and is finished
when that folder holds ``results.json`` (a rerun skips it, as it skips finished cells).
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from clipmag.config.build import build_config
from clipmag.errors import ConfigError
from clipmag.registry.evaluations import get_evaluation
from clipmag.registry.front_ends import get_front_end
from clipmag.results.record import RESULTS_FILE
from clipmag.runtime.logs import caller_logging_kept, logger, release_held_log
from clipmag.storage.folder_lock import FolderLock
from clipmag.train.diverged_record import DIVERGED_FILE, read_divergence
from clipmag.train.run import EXPORT_DIR
from clipmag_experiments.cells.choice import choose_variant, extension_needed
from clipmag_experiments.cells.continuation import continue_cell
from clipmag_experiments.cells.evaluation_args import evaluation_argv
from clipmag_experiments.cells.finished import unfinished_reason
from clipmag_experiments.cells.same_run import finished_twin, share_results
from clipmag_experiments.design.expansion import expand, split_model_entry
from clipmag_experiments.design.grid import (
    CELL_FILE,
    EVALUATIONS_DIR,
    Cell,
    SweepConfig,
    SweepEvaluation,
    SweepGroup,
    SweepVariant,
)
from clipmag_experiments.design.prepare import (
    SweepStep,
    check_prepare,
    fingerprints,
    missing_paths,
    run_prepare,
    steps_read_by,
)
from clipmag_experiments.design.protocol import record_prepared, record_start
from clipmag_experiments.design.selection import check_only, selected
from clipmag_experiments.slurm.jobs import SweepUnfinished, check_cluster
from clipmag_experiments.slurm.launcher import run_on_slurm
from clipmag_experiments.sweep.cell_log import failure_reason, run_logged
from clipmag_experiments.sweep.numerics_check import check_numerics
from clipmag_experiments.sweep.packing import cell_threads, run_packed, with_threads
from clipmag_experiments.sweep.restore import restore_cells, restore_protocol

__all__ = [
    "CELL_FILE",
    "EVALUATIONS_DIR",
    "Cell",
    "SweepConfig",
    "SweepEvaluation",
    "SweepGroup",
    "SweepStep",
    "SweepVariant",
    "expand",
    "split_model_entry",
    "check_cells",
    "run_cell",
    "run_evaluations",
    "runnable_groups",
    "run_sweep",
    "load_sweep_config",
]


# Evaluations run in the sweep's own process: packed cells take turns there (one model loaded at once).
_EVALUATING = threading.Lock()


def run_cell(cell: Cell, launcher: str, nproc: int, packed: bool = False) -> None:
    """Train ``cell`` in this process or under ``torchrun`` (whose output goes to the cell's log too;
    a failure raises :class:`~clipmag_experiments.cell_log.CellFailed`). A ``packed`` cell runs
    beside others: in a process of its own, its output in its log only."""
    cell.write_description()
    front_end = get_front_end(cell.kind)
    if launcher == "inprocess" and not packed:
        with caller_logging_kept():  # the trainer sets up logging in the cell's folder
            front_end.main(cell.argv)
        return
    torchrun = ["-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}"]
    cmd = [sys.executable, *(torchrun if launcher == "torchrun" else []), "-m", front_end.module, *cell.argv]
    run_logged(cmd, cell, echo=not packed)


def run_evaluations(cell: Cell) -> None:
    """Run the cell's unfinished evaluations on its export (the cell itself must be finished).

    When one is pending, ``cell.json`` is rewritten first, so evaluations added to a sweep after
    its cells finished are found by the report too."""
    export = cell.directory / EXPORT_DIR
    pending = [e for e in cell.evaluations if not (cell.evaluation_folder(e) / RESULTS_FILE).is_file()]
    if pending:
        cell.write_description()
    for evaluation in pending:
        folder = cell.evaluation_folder(evaluation)
        if not export.is_dir():
            raise FileNotFoundError(
                f"sweep cell {cell.label}: evaluation {evaluation.folder_name!r} needs the export {export}, "
                "which the run did not write (train.export_final is off?)"
            )
        logger.info("%s: evaluation %s", cell.label, evaluation.folder_name)
        get_evaluation(evaluation.kind).run(export, folder, evaluation_argv(cell, evaluation))


def runnable_groups(cfg: SweepConfig) -> SweepConfig:
    """The sweep without the groups whose required paths are absent (one line names each)."""
    kept = []
    for group in cfg.groups:
        absent = missing_paths(group.requires)
        if absent:
            logger.warning("sweep group %s: skipped, %s not found", group.name, ", ".join(absent))
        else:
            kept.append(group)
    return dataclasses.replace(cfg, groups=kept)


def _argv_choices(cell: Cell, cells: Sequence[Cell]) -> list[list[str]]:
    """The argument lists a cell may run with: its own, or one per variant it may choose."""
    if cell.choice is None:
        return [cell.argv]
    options = {tuple(c.variant_args) for c in cells if c.group == cell.choice.group and c.model == cell.model}
    return [[*cell.argv[: cell.variant_at], *args, *cell.argv[cell.variant_at :]] for args in sorted(options)] or [
        cell.argv
    ]


def check_cells(cells: Sequence[Cell], source: str) -> None:
    """Parse every cell's arguments, and its evaluations', with its front end's own config, running
    nothing: a bad head in the last cell stops the sweep before the first cell trains, with one line
    naming the sweep file, the group and the cell."""
    for cell in cells:
        try:
            for argv in _argv_choices(cell, cells):
                get_front_end(cell.kind).check(argv)
            for evaluation in cell.evaluations:
                folder = cell.evaluation_folder(evaluation)
                get_evaluation(evaluation.kind).check(
                    cell.directory / EXPORT_DIR, folder, evaluation_argv(cell, evaluation)
                )
        except (ValueError, FileNotFoundError) as err:  # ConfigError is a ValueError
            message = str(err).removeprefix("command line: ")
            raise ConfigError(f"{source}: group {cell.group!r}, cell {cell.label}: {message}") from None


def cell_words(cells: Sequence[Cell]) -> list[str]:
    """Every command-line word the ``cells`` run with: their models, arguments and evaluations'."""
    return [word for c in cells for word in [c.model or "", *c.argv, *(w for e in c.evaluations for w in e.argv())]]


def run_sweep(cfg: SweepConfig, only: Sequence[str] = (), source: str = "sweep") -> list[Cell]:
    """Check every cell (and for ``launcher: slurm`` that the cluster answers), prepare, then run
    every unfinished cell and evaluation (optionally only the groups, or a group's cells of one model
    as ``group/model``, in ``only``). A refused sweep writes nothing. ``source`` names the sweep in
    error messages (its file)."""
    check_only(cfg, only, source)
    if cfg.pack > 1 and cfg.launcher == "slurm":
        raise ConfigError(f"{source}: pack runs local cells at once; a SLURM job's resources are its slurm section's")
    cells = [c for c in expand(cfg) if selected(c, only)]
    check_cells(cells, source)
    check_prepare(cfg.prepare, source)
    if cfg.restore_from and Path(cfg.restore_from).exists() and not Path(cfg.restore_from).is_dir():
        raise ConfigError(f"{source}: restore_from {cfg.restore_from} is not a folder: name the archive's folder")
    if cfg.launcher == "slurm":
        check_cluster()
    threads = cell_threads(cfg.pack * cfg.nproc_per_node) if cfg.pack > 1 else 0
    if threads or cfg.launcher == "inprocess":  # torchrun picks an unpinned cell's threads itself
        archive = Path(cfg.restore_from) if cfg.restore_from else None
        check_numerics(with_threads(cells, threads) if threads else cells, source, archive, Path(cfg.output_dir))
    with FolderLock(cfg.output_dir, "sweep") as lock:  # a second sweep on this folder stops here, before preparing
        release_held_log()  # out.log, held back by a caller's setup_logging(hold=True), now the folder is ours
        if cfg.restore_from:
            restore_protocol(Path(cfg.restore_from), Path(cfg.output_dir))
        protocol = record_start(cfg)  # the protocol on disk before any result
        try:
            steps = steps_read_by(cfg.prepare, cell_words(cells)) if only else cfg.prepare
            run_prepare(steps)
            record_prepared(cfg.output_dir, fingerprints(steps))
        except BaseException:  # no cell ran: the folder is left as it was found
            lock.abandon(restore=True)
            raise
        every_cell = [
            dataclasses.replace(c, sweep_sha256=protocol["config_sha256"]) for c in expand(runnable_groups(cfg))
        ]
        if threads:
            every_cell = with_threads(every_cell, threads)
            logger.info("pack %d: up to %d cells at once, each with train.threads=%d", cfg.pack, cfg.pack, threads)
        if cfg.restore_from:  # after the thread counts: a cell is restored only if it ran with this one's
            restore_cells(every_cell, Path(cfg.restore_from), Path(cfg.output_dir))
        cells = [c for c in every_cell if selected(c, only)]
        if cfg.launcher == "slurm":
            run_on_slurm(cells, every_cell, cfg)
        else:
            _run_cells(cells, every_cell, cfg)
    return cells


def _run_cells(cells: Sequence[Cell], every_cell: Sequence[Cell], cfg: SweepConfig) -> None:
    """Run the unfinished ``cells`` (and every evaluation) in order; ``every_cell`` feeds variant
    choices. A cell that fails is one line and the next cell runs; raises :class:`SweepUnfinished`
    at the end, naming every failed cell and its log."""
    total, failed, diverged = len(cells), {}, []
    earlier = sum(unfinished_reason(cell) is None for cell in cells)

    def attempt(i: int, cell: Cell) -> None:
        threads = torch.get_num_threads()
        try:
            _run_one(cell, every_cell, cfg, f"[{i}/{total}]")
        except Exception as err:  # one cell's fault, as one job of an array: Ctrl-C still stops the sweep
            reason = failure_reason(cell, err)
            if read_divergence(cell.directory) is None:
                failed[cell.label] = reason
                logger.warning("[%d/%d] %s: failed (%s); the sweep goes on without it", i, total, cell.label, reason)
            else:
                diverged.append(cell.label)
                logger.warning("[%d/%d] %s: diverged, recorded in %s (%s)", i, total, cell.label, DIVERGED_FILE, reason)
        finally:  # an in-process cell that pins train.threads keeps them for its evaluations, not the next cell
            torch.set_num_threads(threads)

    if cfg.pack > 1:
        run_packed(cells, cfg.pack, attempt)
    else:
        for i, cell in enumerate(cells, 1):
            attempt(i, cell)
    logger.info(
        "sweep ended: of %d cells, %d done (%d finished earlier, %d diverged), %d failed",
        *(total, total - len(failed), earlier, len(diverged), len(failed)),
    )
    if failed:
        raise SweepUnfinished(
            "sweep cells did not finish: "
            + "; ".join(f"{label} ({why})" for label, why in failed.items())
            + ". Fix the cause and run the same command again: finished cells are skipped, the others resume"
        )


def _run_one(cell: Cell, every_cell: Sequence[Cell], cfg: SweepConfig, place: str) -> None:
    """Run ``cell`` unless it is finished, then its unfinished evaluations."""
    reason = unfinished_reason(cell)
    skip = _unneeded_extension(cell, every_cell, cfg) if reason is not None else None
    divergence = read_divergence(cell.directory) if reason is not None else None
    if reason is None:
        logger.info("%s %s: finished earlier, skipped", place, cell.label)
    elif divergence is not None:  # an outcome, not an interruption: the same run would diverge again
        logger.warning(
            "%s %s: diverged earlier at step %s (%s), not run again: remove that file to run it again",
            *(place, cell.label, divergence["step"], cell.directory / DIVERGED_FILE),
        )
        return
    elif skip is not None:
        cell.write_description()
        logger.info("%s %s: grid extension %s", place, cell.label, skip)
        return
    else:
        if (cell.directory / RESULTS_FILE).exists():
            logger.warning("%s %s: not finished (%s): running it again", place, cell.label, reason)
        cell = choose_variant(cell, every_cell)
        if cell.chosen:
            logger.info("%s: variant %s chosen by %s on %s", cell.label, cell.chosen["variant"], *_chosen_by(cell))
        twin = finished_twin(cell, every_cell) if cfg.reuse_same_runs else None
        if twin is not None:
            share_results(cell, twin)
            logger.info("%s %s: the same run as %s: its results taken", place, cell.label, twin.label)
        else:
            cell = continue_cell(cell, every_cell)
            logger.info("%s %s: running%s", place, cell.label, _from(cell))
            start = time.perf_counter()
            run_cell(cell, cfg.launcher, cfg.nproc_per_node, packed=cfg.pack > 1)
            logger.info("%s %s: done in %.0f s", place, cell.label, time.perf_counter() - start)
    with _EVALUATING:
        run_evaluations(cell)


def _unneeded_extension(cell: Cell, every_cell: Sequence[Cell], cfg: SweepConfig) -> str | None:
    """Why a grid-extension cell does not run (None: it runs, or is no extension)."""
    if cell.extends is None:
        return None
    extend = next(g.extend for g in cfg.groups if g.name == cell.group)
    assert extend is not None
    return extension_needed(cell, extend.metric, extend.dataset, every_cell)


def _from(cell: Cell) -> str:
    return f" on from {cell.continues}" if cell.continues else ""


def _chosen_by(cell: Cell) -> tuple[str, str]:
    assert cell.chosen is not None
    scores = ", ".join(f"{v} {x:.4f}" for v, x in cell.chosen["scores"].items())
    return cell.chosen["by"], f"{cell.chosen['from']} ({scores})"


def load_sweep_config(path: str | Path, overrides: Sequence[str] = ()) -> SweepConfig:
    return build_config(SweepConfig, path, overrides)
