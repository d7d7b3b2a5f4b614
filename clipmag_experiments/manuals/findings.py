"""The README's findings: one row per question the stored sweeps answer, rendered from them.

A reader opening the project wants the answer first: what was compared, on how many runs, and what
the tests said under the correction a claim about the whole table needs. Each row takes its sweep's
comparisons as that sweep's own manual section puts them under its whole table's Holm (so the row
and the section can never disagree), counts them with :func:`~clipmag.results.marks.family_tally`,
and links the section that explains them. A question whose sweep has no stored result yet says so,
with the protocol that will answer it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from clipmag.results.marks import family_tally
from clipmag.results.record import RESULTS_FILE
from clipmag.results.significance import Comparison
from clipmag_experiments.design.protocol import read_protocol
from clipmag_experiments.manuals import budget, fair_fight, positive_regime
from clipmag_experiments.report.stored import StoredResults

__all__ = ["BLOCKS", "PENDING", "Pending", "Question", "QUESTIONS"]


@dataclass(frozen=True)
class Question:
    """One row: the question, what its sweep compared, where its comparisons come from, and the
    manual's section."""

    asked: str
    compared: str
    sweep: str
    comparisons: Callable[[StoredResults], list[Comparison]]
    link: str


def _budget(stored: StoredResults) -> list[Comparison]:
    rows = budget.table_rows(stored.sweep(budget.SWEEP))
    heads = [r.heads[h] for r, _ in rows for h in budget.HEADS[1:] if h in r.heads]
    return [h.comparison for h in heads if h.comparison is not None]


def _positive(stored: StoredResults) -> list[Comparison]:
    return [c for _, _, c in positive_regime.table_holm(stored, "scale20")]


def _fair_fight(stored: StoredResults) -> list[Comparison]:
    rows = fair_fight.table_rows(stored.sweep(fair_fight.SWEEP))
    return [h.comparison for h in fair_fight.compared(rows)]


QUESTIONS = (
    Question(
        "Does more training data let a magnitude head overtake cosine?",
        "qnorm and dnorm against cosine, SPLADE and MiniLM starts, 3 budgets, repeated pairs",
        budget.SWEEP,
        _budget,
        "docs/experiments.md#the-budget-sweep-is-the-null-a-budget-artefact",
    ),
    Question(
        "From which start does magnitude help?",
        "dot, qnorm, dnorm, learnable against cosine from three starts, scale 20, code search and SciFact",
        positive_regime.SWEEP,
        _positive,
        "docs/experiments.md#where-magnitude-helps-the-positive-regime-sweep",
    ),
    Question(
        "Does a magnitude head beat a cosine tuned alike, on pairs never repeated?",
        "qnorm, dnorm against cosine from two dot-pretrained starts, 2,560 and 25,600 distinct pairs",
        fair_fight.SWEEP,
        _fair_fight,
        "docs/experiments.md#the-fair-fight-every-head-selected-alike-no-pair-seen-twice",
    ),
)


@dataclass(frozen=True)
class Pending:
    """A question whose protocol is committed but whose sweep has no stored results yet: its row
    says so until the results folder holds a run of that protocol (one of its groups, by name)."""

    asked: str
    protocol: str
    link: str
    folder: str
    group: str

    def answered(self, stored: StoredResults) -> bool:
        """Whether the results folder holds a finished cell of the protocol's compared group: a sweep
        archived over several sittings is still pending while only its earlier groups are stored."""
        starts = read_protocol(stored.root / self.folder)
        named = any(g.get("name") == self.group for s in starts for g in s.get("config", {}).get("groups", []))
        return named and any((stored.root / self.folder / self.group).glob(f"*/*/*/{RESULTS_FILE}"))


PENDING = (
    Pending(
        "The same, powered: tuned at the compared budget, 1,000+ test queries, equivalence within 1 point",
        "configs/sweeps/powered_fight.yaml",
        "docs/experiments.md#the-powered-fight",
        "powered_fight",
        "fight",
    ),
    Pending(
        "Do magnitude heads change CLIP zero-shot, when it is zero-shot?",
        "configs/sweeps/clip_emoji.yaml",
        "docs/clip.md#the-emoji-sweep-the-rebuilt-protocol",
        "clip_emoji",
        "towers",
    ),
)


def findings_table(stored: StoredResults) -> str:
    """The rendered table: one row per question, its tally under the whole table's Holm."""
    lines = [
        "| question | compared | runs | under the whole table's Holm (a mark needs both tests) | more |",
        "|---|---|---|---|---|",
    ]
    for q in QUESTIONS:
        sweep = stored.sweep(q.sweep)
        lines.append(
            f"| {q.asked} | {q.compared} | {sweep.runs_at()} | {family_tally(q.comparisons(stored))} | "
            f"[{q.sweep.replace('_', ' ')}]({q.link}) |"
        )
    for p in PENDING:
        if not p.answered(stored):
            protocol = f"protocol `{p.protocol}`, committed before its run"
            lines.append(f"| {p.asked} | {protocol} | - | not run yet | [protocol]({p.link}) |")
    return "\n".join(lines)


BLOCKS: dict[str, Callable[[StoredResults], str]] = {"findings": findings_table}
