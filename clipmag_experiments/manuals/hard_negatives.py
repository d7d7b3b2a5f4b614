"""The manuals' table and numbers of the hard-negatives sweep (``results/hard_negatives``).

Per test set and head, in-batch negatives only against + 3 mined under the cell's own head and
+ 3 drawn at random from the same pool (one Holm family of two), mined against random (the part
that is "hard" rather than "more"), and qnorm + mined against cosine + mined, each with the
report's query-level test (:mod:`clipmag.results.significance`). They stand in
docs/experiments.md, section "Hard negatives mined under the head", which the README links.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import numpy as np

from clipmag.results.marks import difference_text, mark
from clipmag.results.significance import Comparison, compare_with_baseline
from clipmag_experiments.manuals.arguments import argument_parts
from clipmag_experiments.report.stored import StoredResults, runs_value

__all__ = ["BLOCKS", "VALUES"]

SWEEP = "hard_negatives"
HEADS = ("cosine", "qnorm")
KINDS = ("", "-mined", "-random")
DATASETS = {"scifact": "SciFact (in domain)", "cranfield": "Cranfield (out of domain)"}
Systems = dict[str, dict[int, dict[str, float]]]  # variant -> seed -> query -> nDCG@10


def _systems(stored: StoredResults) -> dict[str, Systems]:
    """Test set -> variant -> seed -> per-query nDCG@10."""

    def collect() -> dict[str, Systems]:
        data: dict[str, Systems] = {}
        for c in stored.sweep(SWEEP).cells:
            for dataset, result in c.results["metrics"].items():
                scores = {q: float(x["NDCG@10"]) for q, x in result["per_query"].items()}
                data.setdefault(dataset, {}).setdefault(c.config, {})[int(c.cell["seed"])] = scores
        return data

    return stored.sweep(SWEEP).derived("systems", collect)


def _mean(system: dict[int, dict[str, float]]) -> float:
    return float(np.mean([np.mean(list(scores.values())) for scores in system.values()]))


def _compare(stored: StoredResults, dataset: str, names: tuple[str, ...], baseline: str) -> dict[str, Comparison]:
    """``names`` against ``baseline`` on ``dataset`` (one Holm family), computed once per sweep."""

    def compute() -> dict[str, Comparison]:
        systems = _systems(stored)[dataset]
        return compare_with_baseline({n: systems[n] for n in (baseline, *names)}, baseline)

    return stored.sweep(SWEEP).derived(("compare", dataset, names, baseline), compute)


def _tests(c: Comparison) -> str:
    p = f"p={c.p_holm:.4f}" if c.p_holm >= 0.0001 else "p<0.0001"
    return f"{difference_text(c)}, {p}" + (f", t={c.p_seeds:.2g}" if c.p_seeds is not None else "")


def table(stored: StoredResults) -> str:
    """Per test set: each variant's mean over seeds; + mined and + random against in-batch only."""
    data = _systems(stored)
    columns = [f"{h}{k}" for h in HEADS for k in KINDS]
    lines = [
        "| test set | " + " | ".join(c.replace("-", " + ") for c in columns) + " |",
        "|---" * (1 + len(columns)) + "|",
    ]
    for dataset, label in DATASETS.items():
        systems = data[dataset]
        best = max(columns, key=lambda n: _mean(systems[n]))
        cells = []
        for head in HEADS:
            tested = _compare(stored, dataset, (f"{head}-mined", f"{head}-random"), head)
            for name in (f"{head}{k}" for k in KINDS):
                text = f"{100 * _mean(systems[name]):.2f}"
                text = f"**{text}**" if name == best else text
                if name in tested:
                    c = tested[name]
                    text += f"{' ' + mark(c) if mark(c) else ''} ({_tests(c)})"
                cells.append(text)
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _pairs(stored: StoredResults, dataset: str) -> dict[str, Comparison]:
    """Mined against random per head, and qnorm + mined against cosine + mined (each its own test)."""
    pairs = {f"{h} + mined vs {h} + random": (f"{h}-mined", f"{h}-random") for h in HEADS}
    pairs["qnorm + mined vs cosine + mined"] = ("qnorm-mined", "cosine-mined")
    return {label: _compare(stored, dataset, (name,), baseline)[name] for label, (name, baseline) in pairs.items()}


def hard_vs_more(stored: StoredResults) -> str:
    """Mined against random (what is "hard" rather than "more"), and qnorm against cosine with mined negatives."""
    lines = ["| test set | comparison | difference x100 [95% interval], MDE, p, t |", "|---|---|---|"]
    for dataset, label in DATASETS.items():
        for name, c in _pairs(stored, dataset).items():
            lines.append(f"| {label} | {name} | {_tests(c)}{' ' + mark(c) if mark(c) else ''} |")
    return "\n".join(lines)


def mean(stored: StoredResults, argument: str) -> str:
    """``DATASET/VARIANT``: nDCG@10 x100, mean over seeds."""
    dataset, variant = argument_parts(argument, 2, "hn-mean")
    return f"{100 * _mean(_systems(stored)[dataset][variant]):.2f}"


def difference(stored: StoredResults, argument: str) -> str:
    """``DATASET/VARIANT/BASELINE``: the mean per-query difference x100 (one test, no family)."""
    dataset, variant, baseline = argument_parts(argument, 3, "hn-difference")
    return f"{100 * _compare(stored, dataset, (variant,), baseline)[variant].difference:+.2f}"


def random_share(stored: StoredResults, argument: str) -> str:
    """``DATASET/HEAD``: the share of the mined gain that random negatives from the same pool also give."""
    dataset, head = argument_parts(argument, 2, "hn-random-share")
    systems = _systems(stored)[dataset]
    plain = _mean(systems[head])
    return f"{(_mean(systems[f'{head}-random']) - plain) / (_mean(systems[f'{head}-mined']) - plain):.0%}"


def hard_p(stored: StoredResults, argument: str) -> str:
    """``DATASET``: the largest p of mined against random over the heads."""
    pairs = _pairs(stored, argument)
    return f"{max(pairs[f'{h} + mined vs {h} + random'].p for h in HEADS):.4f}"


def pool(stored: StoredResults, argument: str = "") -> str:
    """How many SciFact documents judged for a test query are in the mining pool, of the whole corpus."""
    cell = stored.sweep(SWEEP).cells[0]
    judged = cell.results["metrics"]["scifact"]["diagnostics"]["document_norm_effect"]["num_relevant"]
    manifest = json.loads((stored.sweep(SWEEP).folder / "mining" / "scifact-random.json").read_text(encoding="utf-8"))
    return f"{judged} of the {manifest['counts']['corpus_documents']:,}"


def negative_scores(stored: StoredResults, argument: str = "") -> str:
    """Mean cosine of the random and the cosine-mined negatives, and of the positives, to their query."""
    folder = stored.sweep(SWEEP).folder / "mining"
    random, mined = (
        json.loads((folder / f"scifact-{n}.json").read_text(encoding="utf-8"))["counts"]
        for n in ("random", "mined-cosine")
    )
    return (
        f"{random['mean_negative_score']:.2f} to their query, against {mined['mean_negative_score']:.2f} for the mined "
        f"ones and {mined['mean_positive_score']:.2f} for the positives"
    )


BLOCKS: dict[str, Callable[[StoredResults], str]] = {"hard-negatives": table, "hard-vs-more": hard_vs_more}
VALUES: dict[str, Callable[[StoredResults, str], str]] = {
    "hn-runs": runs_value(SWEEP),
    "hn-mean": mean,
    "hn-difference": difference,
    "hn-random-share": random_share,
    "hn-hard-p": hard_p,
    "hn-pool": pool,
    "hn-negative-scores": negative_scores,
}
