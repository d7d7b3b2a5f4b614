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
from typing import NamedTuple

from clipmag.results.marks import family_tally
from clipmag.results.record import RESULTS_FILE
from clipmag.results.significance import Comparison
from clipmag_experiments.design.protocol import read_protocol
from clipmag_experiments.manuals import budget, emoji_towers, fair_fight, ladder, positive_regime, powered_fight
from clipmag_experiments.report.starts import StartRow
from clipmag_experiments.report.stored import StoredResults

__all__ = ["BLOCKS", "PENDING", "Labelled", "Pending", "Question", "QUESTIONS", "compared"]


class Labelled(NamedTuple):
    """One comparison of a question's table with what it compares: ``start · test set · group``
    and the head tested against cosine (the findings figure's line and marker)."""

    label: str
    head: str
    comparison: Comparison


def _labelled(rows: list[StartRow], heads: tuple[str, ...] | None = None) -> list[Labelled]:
    """Every head's tested comparison of ``rows`` (only ``heads`` where given), labelled."""
    return [
        Labelled(f"{r.start} · {r.dataset} · {r.group}", name, head.comparison)
        for r in rows
        for name, head in r.heads.items()
        if head.comparison is not None and (heads is None or name in heads)
    ]


@dataclass(frozen=True)
class Pending:
    """A question whose protocol is committed but whose compared group has no stored results yet: its
    row says so (or what its earlier groups gave, ``status``) until the results folder holds a run of
    that group."""

    asked: str
    protocol: str
    link: str
    folder: str
    group: str
    # what the stored earlier groups say while the compared one waits (None: "not run yet")
    status: Callable[[StoredResults], str | None] | None = None

    def answered(self, stored: StoredResults) -> bool:
        """Whether the results folder holds a finished cell of the protocol's compared group: a sweep
        archived over several sittings is still pending while only its earlier groups are stored."""
        starts = read_protocol(stored.root / self.folder)
        named = any(g.get("name") == self.group for s in starts for g in s.get("config", {}).get("groups", []))
        return named and any((stored.root / self.folder / self.group).glob(f"*/*/*/{RESULTS_FILE}"))


@dataclass(frozen=True)
class Question:
    """One row: the question, what its sweep compared, where its comparisons come from, and the
    manual's section. A sweep stored over several sittings has a ``pending`` record (its row waits
    until the compared group has a run) and says how much of its protocol is stored (``progress``,
    None once all of it is), so a partial table is never read as the whole."""

    asked: str
    compared: str
    sweep: str
    comparisons: Callable[[StoredResults], list[Labelled]]
    link: str
    pending: Pending | None = None
    progress: Callable[[StoredResults], str | None] | None = None


def _budget(stored: StoredResults) -> list[Labelled]:
    rows = [r for r, _ in budget.table_rows(stored.sweep(budget.SWEEP))]
    return _labelled(rows, budget.HEADS[1:])


def _positive(stored: StoredResults) -> list[Labelled]:
    return [
        Labelled(f"{r.start} · {r.dataset} · {r.group}", head, c)
        for r, head, c in positive_regime.table_holm(stored, "scale20")
    ]


def _fair_fight(stored: StoredResults) -> list[Labelled]:
    return _labelled(fair_fight.table_rows(stored.sweep(fair_fight.SWEEP)), fair_fight.HEADS[1:])


def _powered_fight(stored: StoredResults) -> list[Labelled]:
    return _labelled(powered_fight.table_rows(stored.sweep(powered_fight.SWEEP)))


POWERED = Pending(
    "The same, powered: tuned at the compared budget, 1,000+ test queries, equivalence within 1 point",
    "configs/sweeps/powered_fight.yaml",
    "docs/experiments.md#the-powered-fight",
    powered_fight.SWEEP,
    "fight",
    powered_fight.status,
)

LADDER = Pending(
    "Where does magnitude help, from random weights to a Contriever-style start, at 25,600 and 102,400 pairs?",
    "configs/sweeps/ladder.yaml",
    "docs/experiments.md#the-ladder-of-starts",
    ladder.SWEEP,
    "fight",
)


def _where(stored: StoredResults) -> list[Labelled]:
    return [
        Labelled(rung.label, name, head.comparison)
        for rung in ladder.rungs(stored)
        for name, head in rung.row.heads.items()
        if head.comparison is not None
    ]


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
    Question(
        "Does a magnitude head beat, trail or match a cosine tuned at the compared budget?",
        "dot, qnorm, dnorm against cosine from SPLADE, a dot-continued MiniLM and MiniLM, each rate tuned at "
        "25,600 distinct pairs on 1,000 dev queries, tested on 1,000-query sets and three BEIR sets, margin ±1 point",
        powered_fight.SWEEP,
        _powered_fight,
        POWERED.link,
        pending=POWERED,
        progress=powered_fight.progress,
    ),
    Question(
        LADDER.asked,
        "dot, qnorm, dnorm against cosine from five starts in the order of their norm signal (the powered fight's "
        "three, random weights, a Contriever-style start), 25,600 and 102,400 distinct pairs, each sweep's own table",
        ladder.SWEEP,
        _where,
        LADDER.link,
        pending=LADDER,
    ),
)


PENDING = (
    POWERED,
    Pending(
        "Do magnitude heads change CLIP zero-shot, when it is zero-shot?",
        "configs/sweeps/clip_emoji.yaml",
        "docs/clip.md#the-emoji-sweep-the-rebuilt-protocol",
        "clip_emoji",
        "infonce-sym",
        emoji_towers.status,
    ),
    LADDER,
)


def compared(question: Question, stored: StoredResults) -> list[Labelled]:
    """The question's comparisons, computed once per results root (the table and the figure both
    read them)."""
    return stored.rendering(("findings", question.sweep), lambda: question.comparisons(stored))


def findings_table(stored: StoredResults) -> str:
    """The rendered table: one row per question, its tally under the whole table's Holm."""
    lines = [
        "| question | compared | runs | under the whole table's Holm (a mark needs both tests) | more |",
        "|---|---|---|---|---|",
    ]
    for q in QUESTIONS:
        if q.pending is not None and not q.pending.answered(stored):
            continue
        runs = stored.sweep(q.sweep).runs_at()
        left = q.progress(stored) if q.progress else None
        runs += f" (so far: {left})" if left else ""
        lines.append(
            f"| {q.asked} | {q.compared} | {runs} | {family_tally([c.comparison for c in compared(q, stored)])} | "
            f"[{q.sweep.replace('_', ' ')}]({q.link}) |"
        )
    for p in PENDING:
        if not p.answered(stored):
            protocol = f"protocol `{p.protocol}`, committed before its run"
            said = (p.status(stored) if p.status else None) or "not run yet"
            lines.append(f"| {p.asked} | {protocol} | - | {said} | [protocol]({p.link}) |")
    return "\n".join(lines)


BLOCKS: dict[str, Callable[[StoredResults], str]] = {"findings": findings_table}
