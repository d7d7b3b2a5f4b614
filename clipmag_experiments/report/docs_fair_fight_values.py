"""The words and numbers of the fair fight's prose, each rendered from its cells.

What the manuals say the fair fight shows - a head "above", "below" or "level with" cosine on a test
set, a group's tally under Holm over the whole table, how many choices stayed on a grid edge, what
the sweep cost - is written as ``<!-- value:NAME:ARGUMENT -->`` marks, so a sentence that no longer
matches the table (:mod:`clipmag_experiments.report.docs_fair_fight`) is stale for the drift check.
The argument names the row: ``ff-verdict:code-search-25600/pypi-test/splade/dnorm``.
"""

from __future__ import annotations

from collections.abc import Callable

from clipmag.results.marks import family_mark, family_tally, p_text
from clipmag.results.marks import verdict as verdict_of
from clipmag.results.significance import Comparison, compare_with_baseline
from clipmag_experiments.report.docs_fair_fight import HEADS, SWEEP, choices, compared, table_rows
from clipmag_experiments.report.starts import HeadResult
from clipmag_experiments.report.stored import StoredResults, runs_value, time_value

__all__ = ["VALUES"]

# the test sets as a sentence names them
SHORT = {
    "pypi-test": "PyPI test",
    "stdlib": "stdlib",
    "sklearn": "scikit-learn",
    "scifact": "SciFact",
    "cranfield": "Cranfield",
}


def _head(stored: StoredResults, argument: str, value: str) -> HeadResult:
    """``GROUP/DATASET/START/HEAD``: one head's result in the table."""
    parts = argument.split("/")
    if len(parts) != 4:
        raise ValueError(f"value {value}: expected GROUP/DATASET/START/HEAD, got {argument!r}")
    group, dataset, start, head = parts
    for row in table_rows(stored.sweep(SWEEP)):
        if (row.group, row.dataset, row.start) == (group, dataset, start) and head in row.heads:
            return row.heads[head]
    raise ValueError(f"{SWEEP}: no {head} of {start} on {dataset} in group {group!r}")


def _comparison(stored: StoredResults, argument: str, value: str) -> Comparison:
    comparison = _head(stored, argument, value).comparison
    if comparison is None:
        raise ValueError(f"value {value}: {argument} has no test against cosine")
    return comparison


def verdict(stored: StoredResults, argument: str) -> str:
    """``GROUP/DATASET/START/HEAD``: ``above`` / ``below`` / ``level``, with ``†`` where the mark
    survives Holm over the whole table."""
    comparison = _comparison(stored, argument, "ff-verdict")
    return verdict_of(comparison) + family_mark(comparison)


def difference(stored: StoredResults, argument: str) -> str:
    """``GROUP/DATASET/START/HEAD``: the mean per-query difference to cosine x100 with its 95% interval."""
    c = _comparison(stored, argument, "ff-difference")
    return f"{100 * c.difference:+.2f} [{100 * c.ci_low:+.2f}, {100 * c.ci_high:+.2f}]"


def verdicts(stored: StoredResults, argument: str) -> str:
    """``GROUP/START/HEAD``: the head's verdict on every test set of the group, in the table's order
    (``above† on PyPI test, level on stdlib, below on scikit-learn``)."""
    parts = argument.split("/")
    if len(parts) != 3:
        raise ValueError(f"value ff-verdicts: expected GROUP/START/HEAD, got {argument!r}")
    group, start, head = parts
    tested = [
        (r.dataset, r.heads[head].comparison)
        for r in table_rows(stored.sweep(SWEEP))
        if (r.group, r.start) == (group, start) and head in r.heads and r.heads[head].comparison is not None
    ]
    found = [f"{verdict_of(c)}{family_mark(c)} on {SHORT.get(dataset, dataset)}" for dataset, c in tested]
    if not found:
        raise ValueError(f"{SWEEP}: no tested {head} of {start} in group {group!r}")
    return ", ".join(found)


def mean(stored: StoredResults, argument: str) -> str:
    """``GROUP/DATASET/START/HEAD``: the head's nDCG@10 x100, mean over seeds."""
    return f"{100 * _head(stored, argument, 'ff-mean').mean:.2f}"


def rate(stored: StoredResults, argument: str) -> str:
    """``START/HEAD``: the learning rate the dev set chose for the head (``6e-4``)."""
    start, _, head = argument.partition("/")
    found = choices(stored.sweep(SWEEP))
    if (start, head) not in found:
        raise ValueError(f"{SWEEP}: no dev choice for {head} of {start}; expected START/HEAD, got {argument!r}")
    return str(found[(start, head)]["rate"]["value"])


def marked(stored: StoredResults, argument: str) -> str:
    """``above`` / ``below``: every comparison whose mark survives Holm over the whole table;
    ``above-row`` / ``below-row``: every ▲ / ▼ under Holm within its row, survivor or not
    (``splade's dnorm on Cranfield in scifact-2560``, or ``none``)."""
    direction, _, level = argument.partition("-")
    if direction not in ("above", "below") or level not in ("", "row"):
        raise ValueError(f"value ff-marked: expected above, below, above-row or below-row, got {argument!r}")
    found = []
    for row in table_rows(stored.sweep(SWEEP)):
        for head in HEADS[1:]:
            c = row.heads[head].comparison if head in row.heads else None
            if c is not None and verdict_of(c) == direction and (level or family_mark(c)):
                found.append(f"{row.start}'s {head} on {SHORT.get(row.dataset, row.dataset)} in {row.group}")
    return "; ".join(found) or "none"


def tally(stored: StoredResults, argument: str = "") -> str:
    """``GROUP``, or nothing for the whole table: how its comparisons came out under Holm over the
    whole table, with the smallest and largest MDE of those it did not separate from cosine
    (``2 above†, 1 below† and 9 not separated (MDE 1.20-3.40), of 12``)."""
    rows = [r for r in table_rows(stored.sweep(SWEEP)) if r.group == argument or not argument]
    tested = [h.comparison for h in compared(rows)]
    if not tested:
        where = f"group {argument!r}" if argument else "the table"
        raise ValueError(f"{SWEEP}: {where} has no comparison against cosine")
    return family_tally(tested)


# the untrained SPLADE scored on SciFact and Cranfield at the fair fight's SciFact lengths (queries 64)
START_SWEEP, START_GROUP = "positive_regime", "scifact-untuned"
# at step 0 qnorm ranks exactly as dot and dnorm as cosine (a query's own norm orders nothing)
RANKS_AS = {"cosine": "cosine", "dot": "dot", "qnorm": "dot", "dnorm": "cosine"}


def from_start(stored: StoredResults, argument: str) -> str:
    """``DATASET/HEAD``: SPLADE's change from its untrained start after SciFact's repeated pairs
    (``scifact-2560``), x100 with its interval and p: whether a mark against cosine is the head
    rising or cosine falling (``-4.60 [-6.63, -2.67], p<0.001``)."""
    dataset, _, head = argument.partition("/")
    trained = _head(stored, f"scifact-2560/{dataset}/splade/{head}", "ff-from-start")
    untrained = [
        c
        for c in stored.sweep(START_SWEEP).group(START_GROUP)
        if c.cell["model"] == "splade" and c.head == RANKS_AS.get(head)
    ]
    if len(untrained) != 1 or dataset not in untrained[0].results["metrics"]:
        twin = RANKS_AS.get(head)
        raise ValueError(f"value ff-from-start: no untrained splade {twin} on {dataset!r} in {START_GROUP}")
    start = {q: float(v["NDCG@10"]) for q, v in untrained[0].results["metrics"][dataset]["per_query"].items()}
    systems = {"start": dict.fromkeys(trained.per_query, start), head: trained.per_query}
    c = compare_with_baseline(systems, "start")[head]
    return f"{100 * c.difference:+.2f} [{100 * c.ci_low:+.2f}, {100 * c.ci_high:+.2f}], {p_text(c.p)}"


def survivors(stored: StoredResults, argument: str = "") -> str:
    """``3 of 40``: the table's marks that survive Holm over all of its tests (†), and how many tests."""
    rows = table_rows(stored.sweep(SWEEP))
    tested = [h.comparison for h in compared(rows)]
    return f"{sum(1 for c in tested if family_mark(c))} of {len(tested)}"


def edges(stored: StoredResults, argument: str = "") -> str:
    """``0 of 12``: the dev choices (rate and scale, per start and head) that stayed on a grid edge."""
    found = choices(stored.sweep(SWEEP))
    stuck = sum(int(c["rate"]["edge"]) + int(c["scale"]["edge"]) for c in found.values())
    return f"{stuck} of {2 * len(found)}"


VALUES: dict[str, Callable[[StoredResults, str], str]] = {
    "ff-verdict": verdict,
    "ff-difference": difference,
    "ff-verdicts": verdicts,
    "ff-mean": mean,
    "ff-rate": rate,
    "ff-marked": marked,
    "ff-tally": tally,
    "ff-from-start": from_start,
    "ff-survivors": survivors,
    "ff-edges": edges,
    "ff-runs": runs_value(SWEEP),
    "ff-hours": time_value(SWEEP, "hours"),
}
