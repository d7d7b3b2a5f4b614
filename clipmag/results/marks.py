"""How a comparison (:class:`clipmag.results.significance.Comparison`) is written in the report
tables and the manuals: its mark against the baseline (▲ / ▼, † when it survives the whole table's
correction, ≈ when it is equivalent within the protocol's margin there), the same in words
(``above`` / ``below`` / ``not separated`` for a row; ``above`` / ``below`` / ``equivalent`` /
``undecided`` under the whole table's correction), its effect with interval and MDE, a p-value,
and the sentences that name the tests. "Level" is never said of a difference a test merely did not
find: only an equivalence test within a stated margin earns it. Kept apart from the tests themselves, so
that a change of wording never touches the arithmetic a result rests on, and the reverse.
"""

from __future__ import annotations

from clipmag.results.significance import Comparison

__all__ = [
    "POWER_NOTE",
    "QUERY_TEST",
    "SEED_TEST",
    "difference_text",
    "equivalence_mark",
    "family_mark",
    "family_tally",
    "family_verdict",
    "mark",
    "p_text",
    "verdict",
]

QUERY_TEST = (
    "paired two-sided randomisation test over queries (per-query scores averaged over seeds; exact on 0/1 "
    "outcomes, McNemar's test for one seed), and beside it the seed-aware two-level bootstrap (seeds and "
    "queries resampled together), each Holm-corrected over the heads compared with cosine, alpha 0.05; a mark "
    "needs both"
)
SEED_TEST = "paired t-test over seed means (the paper's test)"
POWER_NOTE = (
    "MDE: the smallest difference x100 the query-level test would find with 80% power at the Holm level of "
    "the mark beside it (the row's; the whole table's beside †), so a difference the test does not find could "
    "still be as large as the MDE"
)


def difference_text(comparison: Comparison) -> str:
    """``Δ -4.71 [-6.76, -2.75], MDE 2.21`` (x100): the effect, its interval and what the test could find."""
    c = comparison
    return f"Δ {100 * c.difference:+.2f} [{100 * c.ci_low:+.2f}, {100 * c.ci_high:+.2f}], MDE {100 * c.detectable:.2f}"


def mark(comparison: Comparison | None) -> str:
    """▲ / ▼ when the corrected query-level test says above / below the baseline, else nothing."""
    if comparison is None or not comparison.significant:
        return ""
    return "▲" if comparison.difference > 0 else "▼"


def verdict(comparison: Comparison | None) -> str:
    """The row's mark in the manuals' words: ``above`` / ``below`` the baseline, or ``not separated``."""
    return {"▲": "above", "▼": "below", "": "not separated"}[mark(comparison)]


def family_mark(comparison: Comparison | None) -> str:
    """``†`` beside ▲ / ▼ when the difference also survives Holm over the whole family, in the
    query-level and the seed-aware test."""
    return "†" if comparison is not None and comparison.family_significant else ""


def equivalence_mark(comparison: Comparison | None) -> str:
    """``≈`` when both equivalence tests hold within the protocol's margin under the family's Holm."""
    return "≈" if comparison is not None and comparison.family_equivalent else ""


def family_verdict(comparison: Comparison) -> str:
    """Under the whole family's correction: ``above``, ``below``, ``equivalent`` (within the
    protocol's margin) or ``undecided`` (neither: the tests could not tell)."""
    if comparison.family_significant:
        return "above" if comparison.difference > 0 else "below"
    return "equivalent" if comparison.family_equivalent else "undecided"


def p_text(p: float, name: str = "p") -> str:
    """``p<0.001`` or ``p=0.012``: a p-value as the manuals print it."""
    return f"{name}<0.001" if p < 0.001 else f"{name}={p:.3f}"


def family_tally(comparisons: list[Comparison], words: tuple[str, str, str] = ("above", "below", "equivalent")) -> str:
    """How a family's comparisons came out under its correction, with the smallest and largest MDE
    at the family's level of those it left open: ``1 above†, 0 below†, 2 equivalent≈ and 9
    undecided (MDE 1.20-3.40), of 12``; without a margin the open ones are ``not separated``.
    ``words``: what above, below and equivalent are called (a head's change from its start reads
    ``rose``, ``fell``, ``held``)."""
    above_word, below_word, equivalent_word = words
    above = sum(1 for c in comparisons if c.family_significant and c.difference > 0)
    below = sum(1 for c in comparisons if c.family_significant and c.difference <= 0)
    equivalent = sum(1 for c in comparisons if c.family_equivalent)
    rest = [c for c in comparisons if not c.family_significant and not c.family_equivalent]
    mdes = sorted(100 * (c.detectable_family if c.detectable_family is not None else c.detectable) for c in rest)
    margin = any(c.margin is not None for c in comparisons)
    parts = [f"{above} {above_word}†", f"{below} {below_word}†"] + (
        [f"{equivalent} {equivalent_word}≈"] if margin else []
    )
    open_word = "undecided" if margin else "not separated"
    tail = f"{len(rest)} {open_word}" + (f" (MDE {mdes[0]:.2f}-{mdes[-1]:.2f})" if mdes else "")
    return f"{', '.join(parts)} and {tail}, of {len(comparisons)}"
