"""The words and numbers of the budget sweep's prose, each rendered from its cells.

What the manuals say the budget sweep shows - a head "above", "below" or "level with" cosine at a
budget, how far cosine falls between two budgets, how wide the intervals are, how many marks survive
Holm over the whole table - is written as ``<!-- value:NAME:ARGUMENT -->`` marks, so a sentence
that no longer matches its table is stale for the drift check, like a table. The argument names
the row: ``budget-verdict:cranfield/splade/dnorm/smallest`` is dnorm's verdict against cosine for
SPLADE on Cranfield at the task's smallest budget.
"""

from __future__ import annotations

from collections.abc import Callable

from clipmag.results.marks import family_mark
from clipmag.results.marks import verdict as verdict_of
from clipmag.results.significance import Comparison
from clipmag_experiments.report.docs_budget import BUDGETS, HEADS, SWEEP, table_rows
from clipmag_experiments.report.docs_positive import DATASETS
from clipmag_experiments.report.starts import HeadResult, StartRow
from clipmag_experiments.report.stored import StoredResults

__all__ = ["VALUES"]

POSITIONS = ("smallest", "middle", "largest")


def _parts(argument: str, names: tuple[str, ...], value: str) -> list[str]:
    parts = argument.split("/")
    if len(parts) != len(names):
        raise ValueError(f"value {value}: expected {'/'.join(names)}, got {argument!r}")
    return parts


def _head(stored: StoredResults, dataset: str, start: str, head: str, position: str) -> HeadResult:
    """One head's result at one budget (``smallest`` / ``middle`` / ``largest`` of the task)."""
    if position not in POSITIONS:
        raise ValueError(f"budget {position!r}: one of {', '.join(POSITIONS)}")
    for row, _ in table_rows(stored.sweep(SWEEP)):
        budgets = next(groups for groups in BUDGETS.values() if row.group in groups)
        if (row.dataset, row.start) == (dataset, start) and budgets.index(row.group) == POSITIONS.index(position):
            if head not in row.heads:
                raise ValueError(f"{SWEEP}: no {head} for {start} on {dataset} at the {position} budget")
            return row.heads[head]
    raise ValueError(f"{SWEEP}: no row for {start} on {dataset!r} at the {position} budget")


def _comparison(stored: StoredResults, argument: str, value: str) -> Comparison:
    dataset, start, head, position = _parts(argument, ("DATASET", "START", "HEAD", "BUDGET"), value)
    comparison = _head(stored, dataset, start, head, position).comparison
    if comparison is None:
        raise ValueError(f"{SWEEP}: {head} of {start} on {dataset} at the {position} budget has no test against cosine")
    return comparison


def verdict(stored: StoredResults, argument: str) -> str:
    """``DATASET/START/HEAD/BUDGET``: ``above`` / ``below`` / ``level`` - the row's mark against cosine."""
    return verdict_of(_comparison(stored, argument, "budget-verdict"))


def verdicts(stored: StoredResults, argument: str) -> str:
    """``DATASET/START/HEAD``: the row marks from the smallest budget to the largest, in words
    (``below, level, above``)."""
    dataset, start, head = _parts(argument, ("DATASET", "START", "HEAD"), "budget-verdicts")
    return ", ".join(verdict_of(_head(stored, dataset, start, head, p).comparison) for p in POSITIONS)


def _table_marked(stored: StoredResults, direction: str) -> list[tuple[StartRow, str]]:
    """(row, head) of every comparison the whole-table Holm keeps ``above`` or ``below`` cosine."""
    if direction not in ("above", "below"):
        raise ValueError(f"direction {direction!r}: above or below")
    return [
        (row, head)
        for row, _ in table_rows(stored.sweep(SWEEP))
        for head in HEADS[1:]
        if head in row.heads and family_mark(c := row.heads[head].comparison) and verdict_of(c) == direction
    ]


def table_marked(stored: StoredResults, argument: str) -> str:
    """``above`` / ``below``: each comparison that stays marked under Holm over the whole table."""
    found = []
    for row, head in _table_marked(stored, argument):
        position = POSITIONS[next(g for g in BUDGETS.values() if row.group in g).index(row.group)]
        found.append(f"{row.start}'s {head} on {DATASETS.get(row.dataset, row.dataset)} at the {position} budget")
    return "; ".join(found) or "none"


def table_starts(stored: StoredResults, argument: str) -> str:
    """``above`` / ``below``: how many comparisons stay marked under Holm over the whole table, and
    the starts they come from (``11, all from minilm-dot``)."""
    marked = _table_marked(stored, argument)
    starts = sorted({row.start for row, _ in marked})
    return f"{len(marked)}, all from {starts[0]}" if len(starts) == 1 else f"{len(marked)}, from {', '.join(starts)}"


def difference(stored: StoredResults, argument: str) -> str:
    """``DATASET/START/HEAD/BUDGET``: the mean per-query difference to cosine, x100."""
    return f"{100 * _comparison(stored, argument, 'budget-difference').difference:+.2f}"


def mean(stored: StoredResults, argument: str) -> str:
    """``DATASET/START/HEAD/BUDGET``: nDCG@10 x100, mean over seeds."""
    dataset, start, head, position = _parts(argument, ("DATASET", "START", "HEAD", "BUDGET"), "budget-mean")
    return f"{100 * _head(stored, dataset, start, head, position).mean:.2f}"


def change(stored: StoredResults, argument: str) -> str:
    """``DATASET/START/HEAD/FROM/TO``: how far the head's seed mean moves between two budgets, x100."""
    dataset, start, head, first, last = _parts(argument, ("DATASET", "START", "HEAD", "FROM", "TO"), "budget-change")
    before, after = (_head(stored, dataset, start, head, p).mean for p in (first, last))
    return f"{100 * (after - before):+.2f}"


def interval_widths(stored: StoredResults, argument: str = "") -> str:
    """``1.2-7.9``: the narrowest and widest 95% interval of the table's differences, x100."""
    widths = [100 * (c.ci_high - c.ci_low) for c in _tested(stored)]
    return f"{min(widths):.1f}-{max(widths):.1f}"


def _tested(stored: StoredResults) -> list[Comparison]:
    return [
        c
        for row, _ in table_rows(stored.sweep(SWEEP))
        for head in HEADS[1:]
        if head in row.heads and (c := row.heads[head].comparison) is not None
    ]


def survivors(stored: StoredResults, argument: str = "") -> str:
    """``14 of 48``: the marks of the table that survive Holm over all of its tests (†)."""
    tested = _tested(stored)
    return f"{sum(1 for c in tested if family_mark(c))} of {len(tested)}"


def tests(stored: StoredResults, argument: str = "") -> str:
    """How many tests the table holds: the family of its whole-table Holm."""
    return str(len(_tested(stored)))


VALUES: dict[str, Callable[[StoredResults, str], str]] = {
    "budget-verdict": verdict,
    "budget-verdicts": verdicts,
    "budget-table-marked": table_marked,
    "budget-table-starts": table_starts,
    "budget-difference": difference,
    "budget-mean": mean,
    "budget-change": change,
    "budget-widths": interval_widths,
    "budget-survivors": survivors,
    "budget-tests": tests,
}
