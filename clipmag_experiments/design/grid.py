"""A sweep's grid: its YAML schema (groups of heads x variants x models x seeds, evaluations,
prepare steps) and the cell, one run with its folder and argument list, that a group expands to
(:mod:`clipmag_experiments.design.expansion` checks the groups and builds the cells;
:mod:`clipmag_experiments.sweep.run` runs them)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from clipmag.config.checks import PositiveInt, Seed
from clipmag_experiments.design.comparison import ComparisonProtocol
from clipmag_experiments.design.plan_settings import PlanSettings
from clipmag_experiments.design.prepare import SweepStep
from clipmag_experiments.design.slurm_settings import SlurmSettings

CELL_FILE = "cell.json"
EVALUATIONS_DIR = "evaluations"
UNLABELLED = "default"  # the model folder (and plan label) of a group without ``models``


@dataclass
class SweepVariant:
    """A named set of extra arguments (e.g. a CLIP loss direction with a head)."""

    name: str
    args: list[str] = field(default_factory=list)


@dataclass
class SweepEvaluation:
    """An evaluation run on every cell's export: a registered ``kind``, its ``config`` file and
    extra ``args`` (the evaluation's own command line), and a ``name`` for its folder (default: kind)."""

    kind: str
    name: str = ""
    config: str | None = None
    args: list[str] = field(default_factory=list)

    @property
    def folder_name(self) -> str:
        return self.name or self.kind

    def argv(self) -> list[str]:
        return (["--config", self.config] if self.config else []) + list(self.args)


@dataclass
class VariantChoice:
    """Take each cell's variant from an earlier group: per model and head, the variant of group
    ``group`` whose cells scored the highest mean ``metric`` on ``dataset`` (its only test set when
    unset; ``validation``: the validation scores each candidate kept with its chosen checkpoint, so
    the selection cells may be the compared cells' own seed-0 runs, which ``same_run`` then reuses).
    The earlier group is the selection run (a dev split, e.g. a scale grid); the protocol
    is the rule, fixed before either group runs, and the choice it makes is recorded in
    ``cell.json``. Ties go to the variant listed first. ``head``: choose from that head's cells for
    every head (the paper's learning rate, chosen on cosine alone); unset, each head from its own."""

    group: str
    metric: str = "NDCG@10"
    dataset: str | None = None
    head: str | None = None


@dataclass
class GridExtension:
    """Variants a selection grid tries only when its best lies on an edge: ``low`` beyond the first
    listed variant, ``high`` beyond the last, each in order outward (``variants`` must be listed in
    order, e.g. rising scales). When the best of the grid run so far is its first (last) variant,
    the next ``low`` (``high``) variant runs and the choice is made again, until the best is inside
    or the extension is spent (:mod:`clipmag_experiments.cells.extension`); an extension not needed
    never runs."""

    low: list[SweepVariant] = field(default_factory=list)
    high: list[SweepVariant] = field(default_factory=list)
    # what the edge test reads: every group choosing from this grid must choose by the same
    metric: str = "NDCG@10"
    dataset: str | None = None


@dataclass
class SweepGroup:
    """One grid. ``heads`` and ``variants`` multiply; leave one empty to use only the other.
    ``requires``: paths the group reads; when one is absent the group is skipped with a line.
    ``model_args``: arguments added to one model's cells (after the group's), keyed by its label.
    ``variants`` with ``choose_variant``: every variant runs with the chosen arguments before its own
    (a scale grid at the learning rate chosen on cosine). ``continue_from``: an earlier group whose
    cells (same model, head, variant and seed) this group's cells continue from their final
    checkpoint to more steps - one long run observed at several budgets; only fair under a schedule
    that does not depend on the run's length (``optim.schedule=constant``, which the trainer's resume
    check enforces; :mod:`clipmag_experiments.cells.continuation`)."""

    name: str
    kind: str = "text"  # a registered front end (clipmag.registry.front_ends)
    config: str | None = None
    heads: list[str] = field(default_factory=list)
    variants: list[SweepVariant] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    seeds: list[Seed] = field(default_factory=lambda: [0])
    args: list[str] = field(default_factory=list)
    evaluations: list[SweepEvaluation] = field(default_factory=list)
    requires: list[str] = field(default_factory=list)
    # extra arguments for one model's cells, by its label (e.g. a learning rate chosen per model)
    model_args: dict[str, list[str]] = field(default_factory=dict)
    # the variant of every cell chosen from an earlier group's results (before its own ``variants``)
    choose_variant: VariantChoice | None = None
    # an earlier group whose finished cells this group's cells continue (continuation.py)
    continue_from: str | None = None
    # variants beyond the grid's edges, run only when the grid's best is on that edge (extension.py)
    extend: GridExtension | None = None
    # keys of the sweep's ``slurm`` section this group's jobs ask otherwise (launcher: slurm)
    slurm: dict[str, Any] = field(default_factory=dict)


@dataclass
class SweepConfig:
    name: str = "sweep"
    output_dir: str = "runs/sweep"
    # inprocess: cells one after another in this process; torchrun: each under torchrun with
    # nproc_per_node; slurm: each a job of the cluster (clipmag_experiments/slurm/launcher.py)
    launcher: Literal["inprocess", "torchrun", "slurm"] = "inprocess"
    nproc_per_node: PositiveInt = 1
    # local cells run at once, each in its own process with train.threads = torch's threads / (pack x
    # nproc_per_node): small models leave cores idle on one cell (clipmag_experiments/sweep/packing.py)
    pack: PositiveInt = 1
    slurm: SlurmSettings = field(default_factory=SlurmSettings)
    prepare: list[SweepStep] = field(default_factory=list)
    groups: list[SweepGroup] = field(default_factory=list)
    # appended to every cell's arguments after its group's, so they win: a whole sweep in fp32 is
    # ``clipmag-sweep --config demo.yaml output_dir=runs/demo-fp32 'args=[train.precision=fp32]'``
    args: list[str] = field(default_factory=list)
    # a cell that resolves to the config of a finished cell takes its results (same_run.py)
    reuse_same_runs: bool = True
    # the folder an earlier sitting archived this sweep's finished cells to (sweep/archive.py): cells
    # this folder lacks are restored from it rather than trained again (sweep/restore.py)
    restore_from: str = ""
    # the groups whose systems are compared on test, and how (clipmag_experiments/design/comparison.py)
    comparison: ComparisonProtocol = field(default_factory=ComparisonProtocol)
    # what ``clipmag-sweep plan`` needs beyond the cells: CPU throughputs, stand-in models
    plan: PlanSettings = field(default_factory=PlanSettings)


@dataclass
class Cell:
    group: str
    kind: str
    model: str | None
    head: str | None
    variant: str | None
    seed: int
    directory: Path
    argv: list[str]
    evaluations: list[SweepEvaluation] = field(default_factory=list)
    variant_args: list[str] = field(default_factory=list)  # the variant's part of ``argv``, at ``variant_at``
    variant_at: int = 0
    choice: VariantChoice | None = None  # resolved into ``argv`` by clipmag_experiments.cells.choice
    chosen: dict | None = None  # what the choice picked, and from which scores
    sweep_sha256: str | None = None  # the whole sweep config's hash, set by the sweep that runs the cell
    same_run_as: str | None = None  # the folder of the finished cell whose run this one is (same_run.py)
    continue_from: str | None = None  # the group whose cell of the same place this one continues
    continues: str | None = None  # the folder of that cell, once its checkpoint was taken (continuation.py)
    extends: tuple[str, int] | None = None  # ("low" or "high", 1-based step outward) of a grid extension

    @property
    def label(self) -> str:
        """``group/model/head-variant/seedN``, as its folder is named (a head and a variant both show)."""
        name = "-".join(x for x in (self.head, self.variant) if x)
        return "/".join(x for x in (self.group, self.model, name, f"seed{self.seed}") if x)

    def describe(self) -> dict:
        return {
            "group": self.group,
            "kind": self.kind,
            "model": self.model,
            "head": self.head,
            "variant": self.variant,
            "seed": self.seed,
            "argv": self.argv,
            "evaluations": [{"name": e.folder_name, "kind": e.kind} for e in self.evaluations],
            **({"chosen": self.chosen} if self.chosen else {}),
            "sweep_config_sha256": self.sweep_sha256,
            **({"same_run_as": self.same_run_as} if self.same_run_as else {}),
            **({"continues": self.continues} if self.continues else {}),
            **({"extends": {"edge": self.extends[0], "step": self.extends[1]}} if self.extends else {}),
        }

    def write_description(self) -> None:
        """``cell.json``: what the report reads to place the cell (and its evaluations)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / CELL_FILE).write_text(json.dumps(self.describe(), indent=1))

    def evaluation_folder(self, evaluation: SweepEvaluation) -> Path:
        return self.directory / EVALUATIONS_DIR / evaluation.folder_name


def recorded_description(directory: Path) -> dict[str, Any]:
    """The ``cell.json`` a cell folder holds (what :meth:`Cell.write_description` wrote when it ran),
    or ``{}`` where there is none or it does not parse: each reader then falls back as if it named
    nothing."""
    try:
        description = json.loads((Path(directory) / CELL_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return description if isinstance(description, dict) else {}
