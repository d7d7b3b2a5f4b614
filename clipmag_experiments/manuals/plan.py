"""A sweep's cost plan in the manuals, rendered from its committed config by the code behind
``clipmag-sweep plan``, so the page's table and hours are what the plan command prints and change
with the config, never typed by hand (docs/experiments.md: the fair fight, the powered fight and the
ladder of starts).

The blocks ``fair-fight-plan``, ``powered-fight-plan`` and ``ladder-plan`` are the per-group tables
of pairs trained and CPU-hours at the sweep's stated throughputs; the values
``fair-fight-hours:WHICH``, ``powered-fight-hours:WHICH`` and ``ladder-hours:WHICH`` are a plan's
``total``, the ``extensions``' share (grid extensions run only when a choice lands on an edge) or
the total ``without-extensions``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path

from clipmag_experiments.report.stored import StoredResults
from clipmag_experiments.sweep.plan import CpuPlan, cpu_plan
from clipmag_experiments.sweep.run import load_sweep_config

__all__ = ["BLOCKS", "VALUES"]

FAIR_FIGHT = "fair_fight"
POWERED_FIGHT = "powered_fight"
LADDER = "ladder"
PLANNED = {"fair-fight": FAIR_FIGHT, "powered-fight": POWERED_FIGHT, "ladder": LADDER}  # the names' prefix: sweep


@cache
def _plan(config: Path) -> CpuPlan:
    """The CPU plan of the sweep config at ``config`` (counted once per process: it builds each
    model's shape on the meta device)."""
    return cpu_plan(load_sweep_config(config))


def _sweep_plan(stored: StoredResults, sweep: str) -> CpuPlan:
    """The plan of a sweep's config, beside the results root (``configs/sweeps``)."""
    return _plan(stored.root.resolve().parent / "configs" / "sweeps" / f"{sweep}.yaml")


def _table(plan: CpuPlan) -> str:
    """Per group, the pairs its cells train and their CPU-hours, then the total."""
    lines = ["| group | pairs trained | CPU-hours |", "|---|---|---|"]
    lines += [f"| {group} | {plan.pairs[group]:,} | {plan.hours[group]:.2f} |" for group in plan.pairs]
    lines.append(f"| total | {sum(plan.pairs.values()):,} | {sum(plan.hours.values()):.2f} |")
    return "\n".join(lines)


def _hours(plan: CpuPlan, which: str, name: str) -> str:
    """``total``, ``extensions`` or ``without-extensions``: CPU-hours of training, two decimals."""
    total = sum(plan.hours.values())
    hours = {"total": total, "extensions": plan.extension_hours, "without-extensions": total - plan.extension_hours}
    if which not in hours:
        raise ValueError(f"{name}: {which!r} is none of {', '.join(hours)}")
    return f"{hours[which]:.2f}"


def plan_rate(stored: StoredResults, model: str) -> str:
    """``MODEL``: the training throughput the fair fight's plan states for a model label, pairs a second."""
    rates = _sweep_plan(stored, FAIR_FIGHT).rates
    if model not in rates:
        raise ValueError(f"fair-fight-rate: no stated throughput for {model!r} (stated: {', '.join(rates)})")
    return f"{rates[model]:g}"


def _plan_block(sweep: str) -> Callable[[StoredResults], str]:
    """The block renderer of one sweep's plan table."""
    return lambda stored: _table(_sweep_plan(stored, sweep))


def _hours_value(prefix: str, sweep: str) -> Callable[[StoredResults, str], str]:
    """The value renderer of one sweep's planned hours (``PREFIX-hours:WHICH``)."""
    return lambda stored, which: _hours(_sweep_plan(stored, sweep), which, f"{prefix}-hours")


BLOCKS: dict[str, Callable[[StoredResults], str]] = {
    f"{prefix}-plan": _plan_block(sweep) for prefix, sweep in PLANNED.items()
}
VALUES: dict[str, Callable[[StoredResults, str], str]] = {
    **{f"{prefix}-hours": _hours_value(prefix, sweep) for prefix, sweep in PLANNED.items()},
    "fair-fight-rate": plan_rate,
}
