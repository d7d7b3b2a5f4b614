"""Where a magnitude head helps, by start and budget, in the manuals: the ladder of starts read with
the powered fight (``results/ladder`` and ``results/powered_fight``).

The paper's "where" has two axes, the start and the budget. The powered fight gives three starts at
25,600 pairs; the ladder (``configs/sweeps/ladder.yaml``) adds a random and a Contriever-style start
and 102,400 pairs for two dot-pretrained starts, on the same protocol. Every compared row of either
is a rung: a start, a test set and a budget, each head against cosine under its own sweep's
whole-table Holm (the family its protocol fixed: the two sweeps were planned and run apart), beside
the start's norm signal before fine-tuning, Cohen's d of document norms on that test set (relevant
against never-relevant documents, from its step-0 cell). The rungs of one test set and budget are
ordered by that signal, so a reader sees whether the heads' gains follow it.

- ``ladder-where``: the table, per test set and budget, the starts in the order of their signal;
- ``ladder-answer``: on which rungs a magnitude head is above cosine, or on none of how many.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from clipmag.results.marks import family_verdict
from clipmag.results.record import RESULTS_FILE
from clipmag_experiments.manuals import powered_fight as pf
from clipmag_experiments.manuals.positive_regime import order
from clipmag_experiments.predictor.points import run_budget
from clipmag_experiments.report.starts import StartRow
from clipmag_experiments.report.stored import StoredResults

__all__ = ["BLOCKS", "VALUES", "SWEEP", "Rung", "rungs"]

SWEEP = "ladder"
BUDGET_GROUP = "fight-102400"  # the ladder's compared group at the larger budget
FIGHTS = {pf.SWEEP: (pf.FIGHT,), SWEEP: (pf.FIGHT, BUDGET_GROUP)}  # each sweep's compared groups
MAGNITUDE_HEADS = pf.HEADS[1:]


@dataclass(frozen=True)
class Rung:
    """One compared row of either sweep with the distinct pairs each of its runs trained on."""

    sweep: str
    pairs: int
    row: StartRow

    @property
    def signal(self) -> float | None:
        """Cohen's d of the untrained start's document norms on this test set (None: not recorded)."""
        return self.row.untuned_norms.get("cohens_d")

    @property
    def label(self) -> str:
        signal = "d -" if self.signal is None else f"d {self.signal:+.2f}"
        return f"{self.row.start} ({signal}) · {self.row.dataset} · {self.pairs:,} pairs"


def _compared(stored: StoredResults, sweep: str, groups: tuple[str, ...]) -> bool:
    """Whether the results root holds a finished cell of one of the sweep's compared groups."""
    return any(True for group in groups for _ in (stored.root / sweep / group).glob(f"*/*/*/{RESULTS_FILE}"))


def _place(rung: Rung) -> tuple:
    signal = math.inf if rung.signal is None else rung.signal
    return (order(rung.row.dataset, list(pf.TEST_SETS)), rung.pairs, signal, rung.row.start)


def rungs(stored: StoredResults) -> list[Rung]:
    """Every compared row of the two sweeps, by test set, budget and the start's signal."""

    def compute() -> list[Rung]:
        found = []
        for name, groups in FIGHTS.items():
            if not _compared(stored, name, groups):
                continue
            sweep = stored.sweep(name)
            pairs = {c.cell["group"]: run_budget(c) for c in sweep.cells if c.cell.get("group") in groups}
            found += [Rung(name, pairs[row.group], row) for row in pf.compared_rows(sweep, groups)]
        return sorted(found, key=_place)

    return stored.rendering(("where", "rungs"), compute)


def _dataset(rung: Rung) -> str:
    return pf.TEST_SETS.get(rung.row.dataset, rung.row.dataset)


def _head_cell(row: StartRow, head: str) -> str:
    result = row.heads.get(head)
    if result is None or result.comparison is None:
        return "-"
    return f"**{pf.said(result.comparison)}** ({pf.interval(result.comparison)})"


def where_table(stored: StoredResults) -> str:
    """Per test set and budget, the starts by their norm signal, each magnitude head against cosine."""
    found = rungs(stored)
    if not found:
        return "_Not run yet: neither the powered fight nor the ladder has a compared run stored._"
    lines = [
        "| test set | pairs | start | Cohen's d, step 0 | " + " | ".join(MAGNITUDE_HEADS) + " |",
        "|---" * (len(MAGNITUDE_HEADS) + 4) + "|",
    ]
    for rung in found:
        signal = "-" if rung.signal is None else f"{rung.signal:+.2f}"
        heads = " | ".join(_head_cell(rung.row, h) for h in MAGNITUDE_HEADS)
        lines.append(f"| {_dataset(rung)} | {rung.pairs:,} | {rung.row.start} | {signal} | {heads} |")
    if not any(r.sweep == SWEEP for r in found):
        lines.append("\n_The ladder has no compared run stored yet: these are the powered fight's rungs alone._")
    return "\n".join(lines)


def answer(stored: StoredResults, argument: str = "") -> str:
    """On which rungs a magnitude head is above cosine under its sweep's Holm (both tests), or on
    none of how many: the sentence the README's row for "where" rests on."""
    found = rungs(stored)
    if not found:
        return "not run yet"
    above = [
        (rung, head)
        for rung in found
        for head in MAGNITUDE_HEADS
        if (result := rung.row.heads.get(head)) is not None
        and result.comparison is not None
        and family_verdict(result.comparison) == "above"
    ]
    if not above:
        return f"no magnitude head is above cosine on any of the {len(found)} rungs (start, test set, budget)"
    listed = "; ".join(
        f"{head} from {rung.row.start} on {_dataset(rung)} at {rung.pairs:,} pairs" for rung, head in above
    )
    rungs_above = len({id(rung) for rung, _ in above})
    return f"a magnitude head is above cosine on {rungs_above} of the {len(found)} rungs: {listed}"


BLOCKS: dict[str, Callable[[StoredResults], str]] = {"ladder-where": where_table}
VALUES: dict[str, Callable[[StoredResults, str], str]] = {"ladder-answer": answer}
