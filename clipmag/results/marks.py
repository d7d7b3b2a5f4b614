"""How a comparison (:class:`clipmag.results.significance.Comparison`) is written in the report
tables and the manuals: its mark against the baseline (▲ / ▼, † when it survives the whole table's
correction), the same in words (``above`` / ``below`` / ``level``), its effect with interval and
MDE, a p-value, and the sentences that name the tests. Kept apart from the tests themselves, so
that a change of wording never touches the arithmetic a result rests on, and the reverse.
"""

from __future__ import annotations

from clipmag.results.significance import ALPHA, Comparison

__all__ = [
    "POWER_NOTE",
    "QUERY_TEST",
    "SEED_TEST",
    "difference_text",
    "family_mark",
    "mark",
    "p_text",
    "verdict",
]

QUERY_TEST = (
    "paired two-sided randomisation test over queries (per-query scores averaged over seeds; McNemar's exact "
    "test for 0/1 outcomes), Holm-corrected over the heads compared with cosine, alpha 0.05"
)
SEED_TEST = "paired t-test over seed means (the paper's test)"
POWER_NOTE = (
    "MDE: the smallest difference x100 the query-level test would find with 80% power at the row's Holm "
    "level, so a difference the test does not find could still be as large as the MDE"
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
    """The mark in the manuals' words: ``above`` / ``below`` the baseline, or ``level`` (no mark)."""
    return {"▲": "above", "▼": "below", "": "level"}[mark(comparison)]


def family_mark(comparison: Comparison | None) -> str:
    """``†`` beside ▲ / ▼ when the difference also survives Holm over the whole family (``p_family``)."""
    if comparison is None or comparison.p_family is None or comparison.p_family >= ALPHA:
        return ""
    return "†"


def p_text(p: float, name: str = "p") -> str:
    """``p<0.001`` or ``p=0.012``: a p-value as the manuals print it."""
    return f"{name}<0.001" if p < 0.001 else f"{name}={p:.3f}"
