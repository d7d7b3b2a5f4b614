"""A sweep's cost plan in the manuals, rendered from its committed config by the code behind
``clipmag-sweep plan``, so the page's table and hours are what the plan command prints and change
with the config, never typed by hand (docs/experiments.md, the fair fight).

The block ``fair-fight-plan`` is the per-group table of pairs trained and CPU-hours at the sweep's
stated throughputs; the value ``fair-fight-hours:WHICH`` is its ``total``, the ``extensions``'
share (grid extensions run only when a choice lands on an edge) or the total ``without-extensions``.
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


@cache
def _plan(config: Path) -> CpuPlan:
    """The CPU plan of the sweep config at ``config`` (counted once per process: it builds each
    model's shape on the meta device)."""
    return cpu_plan(load_sweep_config(config))


def _fair_fight(stored: StoredResults) -> CpuPlan:
    """The plan of the fair fight's config, beside the results root (``configs/sweeps``)."""
    return _plan(stored.root.resolve().parent / "configs" / "sweeps" / f"{FAIR_FIGHT}.yaml")


def plan_table(stored: StoredResults) -> str:
    """Per group, the pairs its cells train and their CPU-hours, then the total."""
    plan = _fair_fight(stored)
    lines = ["| group | pairs trained | CPU-hours |", "|---|---|---|"]
    lines += [f"| {group} | {plan.pairs[group]:,} | {plan.hours[group]:.2f} |" for group in plan.pairs]
    lines.append(f"| total | {sum(plan.pairs.values()):,} | {sum(plan.hours.values()):.2f} |")
    return "\n".join(lines)


def plan_hours(stored: StoredResults, which: str) -> str:
    """``total``, ``extensions`` or ``without-extensions``: CPU-hours of training, two decimals."""
    plan = _fair_fight(stored)
    total = sum(plan.hours.values())
    hours = {"total": total, "extensions": plan.extension_hours, "without-extensions": total - plan.extension_hours}
    if which not in hours:
        raise ValueError(f"fair-fight-hours: {which!r} is none of {', '.join(hours)}")
    return f"{hours[which]:.2f}"


def plan_rate(stored: StoredResults, model: str) -> str:
    """``MODEL``: the training throughput the plan states for a model label, pairs a second."""
    rates = _fair_fight(stored).rates
    if model not in rates:
        raise ValueError(f"fair-fight-rate: no stated throughput for {model!r} (stated: {', '.join(rates)})")
    return f"{rates[model]:g}"


BLOCKS: dict[str, Callable[[StoredResults], str]] = {"fair-fight-plan": plan_table}
VALUES: dict[str, Callable[[StoredResults, str], str]] = {"fair-fight-hours": plan_hours, "fair-fight-rate": plan_rate}
