"""``clipmag-sweep plan``: what a sweep costs, before anything is submitted.

For every cell: its optimizer steps and global batch, the parameters of its own model and the FLOPs
of one optimizer step - counted by torch's ``FlopCounterMode`` over a forward and backward of the
cell's model on a batch of the cell's shape (as ``benchmarks/gpu_check.py`` counts them), with the
model built on the ``meta`` device, so no weights are read or held and a 7B encoder is counted on a
laptop - and from those the GPU-hours on a named device at a stated model FLOP utilisation, and the
memory of the weights, gradients and AdamW state per rank under DDP (all of it on every rank) and
under FSDP (sharded over the cell's ranks). Activations are not in the memory column: they depend on
the batch, the lengths and activation checkpointing.

A cell that continues an earlier group's cell (``continue_from``) is priced for the steps it adds. A
cell that chooses its variant from a grid holding its own seed, with arguments that differ from each
grid cell's only by the variant, is free: whatever the grid chooses, the chosen grid cell is its
same run, whose results it takes (:mod:`clipmag_experiments.cells.same_run`).
A grid extension's cells (``extend``) are priced as if every choice landed on an edge, and their
CPU-hours are named apart, so the total is an upper bound.
Where the sweep states the training throughput of its models on a CPU (``plan.cpu_pairs_per_second``,
pairs per second per model label, measured; ``default`` for the cells of a group without ``models``,
whose arguments name the architecture), the plan adds CPU-hours: the pairs a cell trains
(steps x global batch) at its model's rate, and a total per group - training only; loading models
and testing come on top. A model that a prepare step builds is not there before the sweep runs; the
plan counts the stand-in the sweep names for its label (``plan.stand_ins``) in its place.

A front end supplies the count (its module's ``cell_cost(argv, world_size)``, built on
:mod:`clipmag.train.cost`); texts are taken at their configured max lengths, so a count is an upper
bound for batches padded to their longest text.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

from clipmag.errors import ConfigError
from clipmag.registry.front_ends import get_front_end
from clipmag.runtime.devices import Device
from clipmag.train.cost import BYTES_PER_PARAMETER, CellCost
from clipmag_experiments.cells.continuation import continued_cell
from clipmag_experiments.design.expansion import expand
from clipmag_experiments.design.grid import UNLABELLED, Cell, SweepConfig
from clipmag_experiments.design.selection import selected
from clipmag_experiments.design.slurm_settings import resources_for

__all__ = ["CpuPlan", "cell_counter", "cell_world_size", "cpu_plan", "plan_sweep"]


def cell_world_size(cell: Cell, cfg: SweepConfig) -> int:
    """The ranks a cell trains on under the sweep's launcher."""
    if cfg.launcher == "slurm":
        group = next(g for g in cfg.groups if g.name == cell.group)
        resources = resources_for(cfg.slurm, group.slurm, group.name)
        return resources.nodes * resources.tasks
    return cfg.nproc_per_node if cfg.launcher == "torchrun" else 1


COST_FREE_FLAGS = ("--seed", "--output", "--norm")  # the head is a batch x candidates product, left out


def _run_words_dropped(argv: Sequence[str]) -> tuple[str, ...]:
    """The arguments without the seed, the output folder and the head, which a count does not see."""
    kept, skip = [], False
    for word in argv:
        if not skip and word not in COST_FREE_FLAGS:
            kept.append(word)
        skip = word in COST_FREE_FLAGS
    return tuple(kept)


def _counted_argv(cell: Cell, stand_ins: dict[str, str]) -> list[str]:
    """The cell's arguments with its model replaced by the stand-in the sweep names, while it is absent."""
    argv = list(cell.argv)
    if cell.model in stand_ins and "--model" in argv[:-1]:
        at = argv.index("--model") + 1
        if not Path(argv[at]).exists():
            argv[at] = stand_ins[cell.model]
    return argv


def _cost(cell: Cell, world: int, cache: dict[tuple, CellCost | None], stand_ins: dict[str, str]) -> CellCost | None:
    """The front end's count (cached: the seeds and heads of a configuration cost the same)."""
    argv = _counted_argv(cell, stand_ins)
    key = (cell.kind, world, _run_words_dropped(argv))
    if key not in cache:
        module = importlib.import_module(get_front_end(cell.kind).module)
        counter = getattr(module, "cell_cost", None)
        cache[key] = counter(argv, world) if counter is not None else None
    return cache[key]


def _size(n_bytes: float) -> str:
    return f"{n_bytes / 2**30:.1f} GiB"


def _added_steps(
    cell: Cell, cost: CellCost, cells: Sequence[Cell], count: Callable[[Cell], CellCost | None]
) -> CellCost:
    """The cost of the steps ``cell`` adds to the cell it continues (all of them when it continues none)."""
    if cell.continue_from is None:
        return cost
    earlier = count(continued_cell(cell, cells))
    return dataclasses.replace(cost, steps=cost.steps - (earlier.steps if earlier else 0))


def _without_output(argv: Sequence[str]) -> list[str]:
    argv = list(argv)
    if "--output" in argv[:-1]:
        del argv[argv.index("--output") : argv.index("--output") + 2]
    return argv


def shares_a_run(cell: Cell, cells: Sequence[Cell]) -> bool:
    """Whether ``cell`` will be the same run as one of the grid cells it chooses from, whichever
    is chosen: every candidate at its model, head and seed runs ``cell``'s arguments with its variant."""
    choice = cell.choice
    if choice is None:
        return False
    head = choice.head or cell.head
    candidates = [
        c for c in cells if c.group == choice.group and c.model == cell.model and c.head == head and c.extends is None
    ]
    mine = [c for c in candidates if c.seed == cell.seed]
    if not mine or len(mine) != len({str(c.variant) for c in candidates}):
        return False
    for c in mine:
        chosen = [*cell.argv[: cell.variant_at], *c.variant_args, *cell.argv[cell.variant_at :]]
        if _without_output(chosen) != _without_output(c.argv):
            return False
    return True


@dataclasses.dataclass(frozen=True)
class CpuPlan:
    """What a sweep's training costs on the CPU at its stated throughputs (``plan.cpu_pairs_per_second``):
    per group, the pairs its cells train and their CPU-hours, and how many of those hours are grid
    extensions, which run only when a choice lands on an edge."""

    rates: dict[str, float]
    pairs: dict[str, int]
    hours: dict[str, float]
    extension_hours: float

    def summary(self) -> list[str]:
        """The plan's CPU lines: per group, then the total and the extensions' share."""
        stated = ", ".join(f"{label} {rate:g}" for label, rate in self.rates.items())
        lines = ["", f"CPU time at the stated training throughputs (pairs/s: {stated}); training only", ""]
        lines += ["group | pairs trained | CPU-hours", "---|---|---"]
        lines += [f"{group} | {self.pairs[group]:,} | {self.hours[group]:.2f}" for group in self.pairs]
        total = sum(self.hours.values())
        lines.append(f"total: {total:.2f} CPU-hours ({sum(self.pairs.values()):,} pairs)")
        if self.extension_hours:
            lines.append(
                f"of which grid extensions: {self.extension_hours:.2f} CPU-hours, run only when a choice lands on a "
                f"grid edge: without them {total - self.extension_hours:.2f} CPU-hours"
            )
        return lines


def cell_counter(cfg: SweepConfig) -> Callable[[Cell], CellCost | None]:
    """The cost of a cell of ``cfg`` (None: its front end has no cost model), counted once per shape."""
    cache: dict[tuple, CellCost | None] = {}
    return lambda cell: _cost(cell, cell_world_size(cell, cfg), cache, cfg.plan.stand_ins)


def cpu_plan(
    cfg: SweepConfig, count: Callable[[Cell], CellCost | None] | None = None, only: Sequence[str] = ()
) -> CpuPlan:
    """The sweep's CPU plan: each cell's added pairs at its model's stated rate (cells of a model
    with no stated rate, or with no cost model, are left out)."""
    count = count or cell_counter(cfg)
    rates = dict(cfg.plan.cpu_pairs_per_second)
    pairs: dict[str, int] = defaultdict(int)
    hours: dict[str, float] = defaultdict(float)
    extension_hours = 0.0
    cells = expand(cfg)
    for cell in cells:
        label = cell.model or UNLABELLED  # a group without ``models`` names its architecture in its arguments
        if not selected(cell, only) or label not in rates or shares_a_run(cell, cells):
            continue
        cost = count(cell)
        if cost is None:
            continue
        cost = _added_steps(cell, cost, cells, count)
        pairs[cell.group] += cost.steps * cost.global_batch
        cell_hours = cost.steps * cost.global_batch / rates[label] / 3600
        hours[cell.group] += cell_hours
        extension_hours += cell_hours if cell.extends else 0.0
    return CpuPlan(rates, dict(pairs), dict(hours), extension_hours)


def plan_sweep(cfg: SweepConfig, device: Device, utilisation: float, only: Sequence[str] = ()) -> str:
    """The plan as a table: a row per cell, then the sweep's total GPU-hours."""
    if not 0 < utilisation <= 1:
        raise ConfigError(f"utilisation {utilisation}: expected a fraction of the device's peak in (0, 1]")
    header = "cell | ranks | steps | global batch | parameters | TFLOPs/step | GPU-hours | DDP / rank | FSDP / rank"
    lines = [
        f"cost plan on {device.name} (dense bf16 {device.dense_bf16_tflops:g} TFLOP/s) at {utilisation:.0%} "
        "model FLOP utilisation; memory: weights, gradients and AdamW state (16 bytes a parameter), no activations",
        "",
        header,
        "|".join("---" for _ in header.split("|")),
    ]
    total = 0.0
    cells = expand(cfg)
    count = cell_counter(cfg)
    for cell in cells:
        if not selected(cell, only):
            continue
        world = cell_world_size(cell, cfg)
        cost = count(cell)
        if cost is None:
            lines.append(f"{cell.label} | {world} | no cost model for front end {cell.kind!r} |")
            continue
        cost = _added_steps(cell, cost, cells, count)
        hours = cost.gpu_hours(device, utilisation)
        total += hours
        state = BYTES_PER_PARAMETER * cost.parameters
        lines.append(
            f"{cell.label} | {world} | {cost.steps} | {cost.global_batch} | {cost.parameters / 1e6:.1f}M | "
            f"{cost.flops_per_step / 1e12:.2f} | {hours:.2f} | {_size(state)} | {_size(state / world)}"
        )
    lines += ["", f"total: {total:.1f} GPU-hours on {device.name}"]
    if cfg.plan.cpu_pairs_per_second:
        lines += cpu_plan(cfg, count, only).summary()
    return "\n".join(lines)
