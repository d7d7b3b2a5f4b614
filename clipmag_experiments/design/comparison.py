"""How a sweep's systems are compared on test: part of its protocol, fixed before any result.

A sweep that tries several settings per head (loss scales, learning rates) must not pick the best
of them on the test set and then test it there: the pick and the test would read the same queries.
So the protocol names the groups whose cells are the compared systems (``comparison.groups``), and
each such group has one setting per head - fixed in its config, or chosen on a dev split by a
selection group (``choose_variant``). On test, every head of a compared group is compared with the
baseline head of the same group, model and test set by the query-level randomisation test, Holm's
correction over the heads of that row, alpha 0.05, with the 95% interval of the difference and the
smallest difference the test would find with 80% power beside it (:mod:`clipmag.results.significance`).
The report builds exactly those comparisons (:mod:`clipmag_experiments.report.comparison`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from clipmag.config.checks import PositiveFloat
from clipmag.errors import ConfigError
from clipmag.results.marks import QUERY_TEST
from clipmag.results.significance import ALPHA, POWER

__all__ = ["BASELINE", "ComparisonProtocol", "check_comparison", "comparison_statement"]

BASELINE = "cosine"


@dataclass
class ComparisonProtocol:
    """``groups``: the groups whose cells are the systems compared on test, each head at its one
    setting (fixed, or chosen on dev); empty: the sweep declares no comparison, and its report
    compares each group's heads within the group."""

    groups: list[str] = field(default_factory=list)
    # Holm's family: the heads of one row (one group, start and test set), or every comparison of
    # every compared group at once (the whole table: stricter, one claim over the whole sweep)
    holm: Literal["row", "table"] = "row"
    # the equivalence margin, on the metric's scale (0.01: one nDCG@10 point): with it every
    # comparison reads above, below, equivalent within the margin, or undecided
    margin: PositiveFloat | None = None
    # the group whose cells are each start's untrained score (train.steps=0), one per head: every
    # table shows it, and each head's change from it is tested beside its difference from cosine
    start_group: str = ""


def check_comparison(protocol: ComparisonProtocol, groups: Sequence[Any]) -> None:
    """Refuse a comparison that names no group of the sweep, or a group with several settings per
    head (``variants`` without a dev choice), whose best setting could only be picked on test."""
    by_name = {g.name: g for g in groups}
    for name in protocol.groups:
        group = by_name.get(name)
        if group is None:
            raise ConfigError(f"comparison.groups: {name!r} is not a group of the sweep ({', '.join(by_name)})")
        if group.variants and group.choose_variant is None:
            raise ConfigError(
                f"comparison.groups: group {name!r} lists variants, several settings per head; comparing them on "
                "test would pick the best setting on the test set. Compare a group that chooses each head's "
                "setting on dev (choose_variant) or fixes one"
            )
        if group.heads and BASELINE not in group.heads:
            raise ConfigError(f"comparison.groups: group {name!r} has no {BASELINE} cells to compare its heads with")
    if protocol.start_group and protocol.start_group not in by_name:
        raise ConfigError(
            f"comparison.start_group: {protocol.start_group!r} is not a group of the sweep ({', '.join(by_name)})"
        )


def _selection(group: Any) -> str:
    choice = group.choose_variant
    if choice is None:
        return "one setting per head, fixed in the sweep config"
    return f"each head's setting chosen on the selection group {choice.group!r} by {choice.metric} (its dev split)"


def comparison_statement(protocol: ComparisonProtocol, groups: Sequence[Any]) -> dict[str, Any]:
    """The comparison as ``sweep.json`` records it before the first result."""
    by_name = {g.name: g for g in groups}
    return {
        "baseline": BASELINE,
        "groups": {name: _selection(by_name[name]) for name in protocol.groups},
        "test": QUERY_TEST,
        "family": (
            f"every comparison with {BASELINE} of every compared group, start and test set (Holm's correction)"
            if protocol.holm == "table"
            else f"the heads compared with {BASELINE} on one model and test set (Holm's correction)"
        ),
        "holm": protocol.holm,
        "alpha": ALPHA,
        "margin": protocol.margin,
        "equivalence": (
            None
            if protocol.margin is None
            else f"two one-sided tests within +-{protocol.margin:g} (query-level and seed-aware, Holm over the same "
            "family): each comparison reads above, below, equivalent within the margin, or undecided"
        ),
        "start_group": protocol.start_group or None,
        "power": f"the smallest difference found with {POWER:.0%} power, and the 95% interval, beside every test",
    }
