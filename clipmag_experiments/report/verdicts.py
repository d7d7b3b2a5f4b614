"""Score qnorm/dnorm predictors against the measured winners, and against the guess that needs no
predictor: always the majority class.

A predictor judges a start before fine-tuning, so its verdict is one per start and task whatever the
fine-tuning setting; each setting (a fine-tuned group: the paper's scale, each head's dev-chosen
scale) is scored on its own cases, never pooled, which would count each verdict once per setting.

A predictor that reads the untuned model is only worth running if it beats the constant answer
"the head that won most often on these same cells". That constant is fitted to the outcomes it is
scored on (it knows which class is the majority), so it is a stringent baseline: a predictor that
only ties it has shown nothing.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from clipmag.results.record import RESULTS_FILE
from clipmag_experiments.design.grid import EVALUATIONS_DIR
from clipmag_experiments.report.collect import CellResult
from clipmag_experiments.report.starts import StartRow

__all__ = ["PredictorCase", "predictor_cases", "scorecard", "scorecards"]

PREDICT_EVALUATION = "predict"
PREDICTORS = ("fisher", "query_cv_ratio")


@dataclass(frozen=True)
class PredictorCase:
    """One fine-tuned group and start: qnorm and dnorm's nDCG@10 (mean over its test sets and
    seeds), the winner, and each predictor's verdict on the untuned start."""

    group: str
    start: str
    qnorm: float
    dnorm: float
    verdicts: dict[str, str]

    @property
    def winner(self) -> str:
        return "qnorm" if self.qnorm > self.dnorm else "dnorm"


def _steps(cell: CellResult) -> int:
    return int(cell.results.get("run", {}).get("steps", -1))


def _verdicts(cells: list[CellResult], start: str, datasets: set[str]) -> dict[str, str]:
    """The predictors' verdicts on the untuned start whose test sets include ``datasets``."""
    for c in cells:
        if c.cell.get("model") != start or _steps(c) != 0 or not datasets <= set(c.results["metrics"]):
            continue
        folder = c.directory / EVALUATIONS_DIR / PREDICT_EVALUATION
        if (folder / RESULTS_FILE).is_file():
            result = json.loads((folder / RESULTS_FILE).read_text(encoding="utf-8"))
            return {name: str(result[name]["verdict"]) for name in PREDICTORS}
    return {}


def predictor_cases(cells: list[CellResult], rows: Sequence[StartRow]) -> list[PredictorCase]:
    """A case per (fine-tuned group, start) whose qnorm and dnorm ran and whose start was judged."""
    by_start: dict[tuple[str, str], list[StartRow]] = defaultdict(list)
    for r in rows:
        by_start[(r.group, r.start)].append(r)
    cases = []
    for (group, start), start_rows in by_start.items():
        q = float(np.mean([x.heads["qnorm"].mean for x in start_rows if "qnorm" in x.heads] or [math.nan]))
        d = float(np.mean([x.heads["dnorm"].mean for x in start_rows if "dnorm" in x.heads] or [math.nan]))
        verdicts = _verdicts(cells, start, {x.dataset for x in start_rows})
        if not math.isnan(q) and not math.isnan(d) and verdicts:
            cases.append(PredictorCase(group, start, q, d, verdicts))
    return cases


def scorecards(cases: Sequence[PredictorCase]) -> list[str]:
    """A scorecard per fine-tuned group (setting), headed by its name."""
    lines = []
    for group in dict.fromkeys(c.group for c in cases):
        lines.append(f"- Setting `{group}`:")
        card = scorecard([(c.winner, c.verdicts) for c in cases if c.group == group])
        lines += [f"  {line}" for line in card]
    return lines


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
