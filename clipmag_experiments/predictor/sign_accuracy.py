"""Does a diagnostic measured before fine-tuning predict whether a magnitude head beats cosine?

Over the points of stored sweeps (:mod:`clipmag_experiments.predictor.points`), for each diagnostic
and each head (``qnorm``, ``dnorm``), the outcome of a point is whether the head's mean nDCG@10
ended above cosine's (change > 0; a tie counts as not above). The predictor is a threshold rule,
"above when direction x (diagnostic - threshold) > 0", fitted to every start but one (direction
and threshold, among the midpoints of the fitted values and -inf / +inf, maximise the fitted
accuracy; ties go to the first found, direction +1 before -1, the lowest threshold first) and
scored on the start left out: leave-one-start-out, so no start's outcome chooses its own
threshold. The baseline needs no diagnostic: the majority outcome of the same fitted starts
(a tie predicts "not above").

Uncertainty, per rule: the accuracy's 95% Wilson interval and the baseline's; McNemar's exact test
of the rule against the baseline on the same points; and a permutation test: the diagnostic values
shuffled among the points of each (test set, budget) stratum, seeded, the whole leave-one-start-out
refitted each time, ``p = (1 + #{permuted accuracy >= observed}) / (1 + n)``, with Holm's correction
over every rule of the record (the summary's verdict reads the corrected p). Points of one start
share its diagnostic, so they are not independent: the Wilson interval and McNemar's test treat them
as if they were and overstate certainty; the permutation test keeps the strata but not that
dependence either; the per-start accuracies show how much one start carries.

    python -m clipmag_experiments.predictor.sign_accuracy --sweeps results/positive_regime results/fair_fight \\
        --output runs/predictor_signs.json
"""

from __future__ import annotations

import json
import math
import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from clipmag.config.command_line import field_flags, parse_cli
from clipmag.results.provenance import provenance
from clipmag.results.significance import holm, mcnemar_p
from clipmag_experiments.predictor.points import (
    MAGNITUDE_HEADS,
    Point,
    diagnostics_records,
    sweep_points,
    untuned_diagnostics,
)
from clipmag_experiments.report.collect import find_cells

__all__ = ["Rule", "fit_rule", "leave_one_start_out", "wilson", "score_predictors", "main"]

FEATURES = ("cohens_d", "query_norm_cv", "document_norm_cv", "log_kappa_ratio")
LEVEL = 0.95


@dataclass(frozen=True)
class Rule:
    """Predict "above cosine" when ``direction * (value - threshold) > 0``."""

    direction: int
    threshold: float

    def predict(self, value: float) -> bool:
        return self.direction * (value - self.threshold) > 0


def fit_rule(values: Sequence[float], outcomes: Sequence[bool]) -> Rule:
    """The rule of highest accuracy on these points (module docstring: candidates and ties)."""
    ordered = sorted(set(values))
    cuts = [-math.inf] + [(a + b) / 2 for a, b in zip(ordered, ordered[1:])] + [math.inf]
    best, best_correct = Rule(1, cuts[0]), -1
    for direction in (1, -1):
        for cut in cuts:
            rule = Rule(direction, cut)
            correct = sum(rule.predict(v) == o for v, o in zip(values, outcomes))
            if correct > best_correct:
                best, best_correct = rule, correct
    return best


def _majority(outcomes: Sequence[bool]) -> bool:
    return sum(outcomes) > len(outcomes) / 2


def leave_one_start_out(
    starts: Sequence[str], values: Sequence[float], outcomes: Sequence[bool]
) -> tuple[list[bool], list[bool], list[dict[str, Any]]]:
    """Per point, the rule's and the baseline's prediction with its start left out of the fit, and
    each fold's rule and majority."""
    rule_says, base_says = [False] * len(starts), [False] * len(starts)
    folds = []
    for held in sorted(set(starts)):
        train = [i for i, s in enumerate(starts) if s != held]
        rule = fit_rule([values[i] for i in train], [outcomes[i] for i in train])
        majority = _majority([outcomes[i] for i in train])
        for i, s in enumerate(starts):
            if s == held:
                rule_says[i], base_says[i] = rule.predict(values[i]), majority
        threshold = rule.threshold if math.isfinite(rule.threshold) else None  # None: one answer everywhere
        folds.append({"held_out": held, "direction": rule.direction, "threshold": threshold, "majority": majority})
    return rule_says, base_says, folds


def wilson(correct: int, n: int) -> list[float]:
    """The 95% Wilson score interval of a proportion."""
    from scipy import stats

    interval = stats.binomtest(correct, n).proportion_ci(confidence_level=LEVEL, method="wilson")
    return [float(interval.low), float(interval.high)]


def _accuracy(said: Sequence[bool], outcomes: Sequence[bool]) -> float:
    return float(np.mean([s == o for s, o in zip(said, outcomes)]))


def _permutation_p(
    points: Sequence[Point], values: Sequence[float], outcomes: Sequence[bool], observed: float, n: int, seed: int
) -> float:
    strata: dict[tuple[str, int], list[int]] = defaultdict(list)
    for i, p in enumerate(points):
        strata[(p.dataset, p.budget)].append(i)
    starts = [p.start for p in points]
    rng = random.Random(seed)
    at_least = 0
    for _ in range(n):
        shuffled = list(values)
        for members in strata.values():
            drawn = [values[i] for i in members]
            rng.shuffle(drawn)
            for i, v in zip(members, drawn):
                shuffled[i] = v
        said, _, _ = leave_one_start_out(starts, shuffled, outcomes)
        at_least += _accuracy(said, outcomes) >= observed - 1e-12
    return (1 + at_least) / (1 + n)


def _score(points: Sequence[Point], feature: str, head: str, permutations: int, seed: int) -> dict[str, Any] | None:
    """One (diagnostic, head) rule over the points that have both (None: fewer than two starts)."""
    usable = [p for p in points if feature in p.diagnostics and head in p.deltas]
    starts = [p.start for p in usable]
    if len(set(starts)) < 2:
        return None
    values = [p.diagnostics[feature] for p in usable]
    outcomes = [p.deltas[head] > 0 for p in usable]
    said, base, folds = leave_one_start_out(starts, values, outcomes)
    right, base_right = [s == o for s, o in zip(said, outcomes)], [b == o for b, o in zip(base, outcomes)]
    n, base_correct = len(usable), sum(base_right)
    per_start = {
        s: {"points": starts.count(s), "correct": sum(r for r, t in zip(right, starts) if t == s)}
        for s in sorted(set(starts))
    }
    return {
        "feature": feature,
        "head": head,
        "points": n,
        "starts": len(set(starts)),
        "above_cosine": sum(outcomes),
        "accuracy": sum(right) / n,
        "correct": sum(right),
        "interval": wilson(sum(right), n),
        "baseline": {"accuracy": base_correct / n, "correct": base_correct, "interval": wilson(base_correct, n)},
        "mcnemar_p": mcnemar_p(right, base_right),
        "permutation_p": _permutation_p(usable, values, outcomes, sum(right) / n, permutations, seed),
        "per_start": per_start,
        "folds": folds,
    }


def _summary(rules: Sequence[Mapping[str, Any]]) -> str:
    """One sentence: whether any rule beat its baseline beyond chance."""
    if not rules:
        return "No rule could be tested: fewer than two starts have both an outcome and a diagnostic."
    best = max(rules, key=lambda r: (r["accuracy"] - r["baseline"]["accuracy"], -r["permutation_p"]))
    text = (
        f"Best rule: {best['feature']} for {best['head']}, leave-one-start-out accuracy {best['accuracy']:.2f} "
        f"({best['correct']}/{best['points']}, 95% {best['interval'][0]:.2f}-{best['interval'][1]:.2f}) against "
        f"the majority's {best['baseline']['accuracy']:.2f}, permutation p {best['permutation_p']:.3f} "
        f"(Holm over {len(rules)} rules: {best['permutation_p_holm']:.3f})"
    )
    beats = best["accuracy"] > best["baseline"]["accuracy"] and best["permutation_p_holm"] < 0.05
    return text + ("." if beats else "; no diagnostic predicts the sign better than the majority beyond chance.")


def score_predictors(
    points: Sequence[Point], features: Sequence[str] = FEATURES, permutations: int = 2000, seed: int = 0
) -> dict[str, Any]:
    """The record: every point, every (diagnostic, head) rule scored, and a one-sentence summary."""
    rules = [
        scored
        for feature in features
        for head in MAGNITUDE_HEADS
        if (scored := _score(points, feature, head, permutations, seed)) is not None
    ]
    for rule, adjusted in zip(rules, holm([r["permutation_p"] for r in rules])):
        rule["permutation_p_holm"] = adjusted
    return {
        "definition": __doc__.split("\n\n    python")[0].strip(),
        "settings": {"features": list(features), "permutations": permutations, "seed": seed, "level": LEVEL},
        "points": [p.to_dict() for p in points],
        "rules": rules,
        "summary": _summary(rules),
    }


def collect_points(sweeps: Sequence[str | Path], diagnostics: Sequence[str | Path] = ()) -> list[Point]:
    """Every point of ``sweeps`` with the diagnostics of its (start, test set): untuned cells first,
    then start-diagnostics records attached to them, then the ``diagnostics`` files given."""
    points, cells = [], []
    for sweep in sweeps:
        found = find_cells(sweep)
        if not found:
            raise ValueError(f"{sweep}: no finished sweep cell (cell.json beside results.json) under it")
        cells += found
        points += sweep_points(sweep, found)
    known = untuned_diagnostics(cells)
    for key, values in diagnostics_records(diagnostics, cells).items():
        known.setdefault(key, {}).update(values)
    for p in points:
        p.diagnostics = dict(known.get((p.start, p.dataset), {}))
    return points


@dataclass
class SignTestCommand:
    """``sweeps``: stored sweep folders; ``diagnostics``: start-diagnostics records (files or folders)
    for starts whose sweeps hold no untuned cell; ``output``: the record (JSON)."""

    sweeps: list[str] = field(default_factory=list)
    diagnostics: list[str] = field(default_factory=list)
    permutations: int = 2000
    seed: int = 0
    output: str = "predictor_signs.json"


def main(argv: Sequence[str]) -> dict[str, Any]:
    """Test the predictors over the sweeps' points and write the record."""
    cmd = parse_cli(SignTestCommand, argv, field_flags(SignTestCommand), description=__doc__)
    if not cmd.sweeps:
        raise ValueError("--sweeps: name at least one stored sweep folder (e.g. results/fair_fight)")
    points = collect_points(cmd.sweeps, cmd.diagnostics)
    record = score_predictors(points, permutations=cmd.permutations, seed=cmd.seed)
    record["sources"] = {"sweeps": list(cmd.sweeps), "diagnostics": list(cmd.diagnostics)}
    record["provenance"] = provenance(record["settings"])
    Path(cmd.output).parent.mkdir(parents=True, exist_ok=True)
    Path(cmd.output).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    lacking = sorted({f"{p.start} on {p.dataset}" for p in points if not p.diagnostics})
    if lacking:
        print(f"no diagnostics before fine-tuning for {', '.join(lacking)}: those points are not scored")
    print(record["summary"])
    return record


if __name__ == "__main__":
    from clipmag.config.entry import run_entry_point

    run_entry_point(main)
