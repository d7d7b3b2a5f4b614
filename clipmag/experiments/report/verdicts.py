"""Score qnorm/dnorm predictors against the measured winners, and against the guess that needs no
predictor: always the majority class.

A predictor that reads the untuned model is only worth running if it beats the constant answer
"the head that won most often on these same cells". That constant is fitted to the outcomes it is
scored on (it knows which class is the majority), so it is a stringent baseline: a predictor that
only ties it has shown nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

__all__ = ["scorecard"]


def scorecard(cases: Sequence[tuple[str, Mapping[str, str]]]) -> list[str]:
    """Markdown lines for ``cases``: (measured winner, {predictor: verdict}) per group / start.

    One line per predictor (right on k of n) and one for the majority-class guess on the same
    cases, with a plain verdict of whether each predictor beats that guess."""
    if not cases:
        return []
    n = len(cases)
    counts = Counter(winner for winner, _ in cases)
    majority, majority_right = counts.most_common(1)[0]
    lines = [
        f"- Majority-class baseline over these {n} cases: always **{majority}** is right on {majority_right} of {n}."
    ]
    names = list(dict.fromkeys(name for _, verdicts in cases for name in verdicts))
    for name in names:
        scored = [(winner, verdicts[name]) for winner, verdicts in cases if name in verdicts]
        right = sum(winner == verdict for winner, verdict in scored)
        baseline = sum(winner == majority for winner, _ in scored)
        verdict = "beats" if right > baseline else "ties" if right == baseline else "loses to"
        lines.append(
            f"- Predictor {name}: right on {right} of {len(scored)}; it **{verdict}** the majority-class "
            f"baseline ({baseline} of {len(scored)} on the same cases)."
        )
    return lines
