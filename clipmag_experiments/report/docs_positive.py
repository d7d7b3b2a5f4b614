"""The manuals' tables of the positive-regime sweep (``results/positive_regime``), rendered from its cells.

Every block here is named in README.md or docs/experiments.md (``<!-- results:NAME -->``) and
re-rendered by ``clipmag-report docs`` (:mod:`clipmag_experiments.report.docs_sync`); the numbers
of the prose around them are :mod:`clipmag_experiments.report.docs_positive_values`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

import numpy as np

from clipmag.results.marks import difference_text, family_mark, mark, p_text
from clipmag.results.significance import Comparison
from clipmag_experiments.report.starts import StartRow
from clipmag_experiments.report.stored import StoredResults, StoredSweep
from clipmag_experiments.report.verdicts import PredictorCase, predictor_cases

__all__ = [
    "BLOCKS",
    "SWEEP",
    "SETTINGS",
    "head_cell",
    "lr_grid_table",
    "order",
    "ordered_rows",
    "p_and_t",
    "predictor_scores",
    "scale_grid_table",
]

SWEEP = "positive_regime"
# the two settings the sweep fixed before it ran, each a fine-tuned group per task
SETTINGS = {
    "scale 20": ("code-search", "scifact"),
    "each head's dev-chosen scale": ("code-search-dev-scale", "scifact-dev-scale"),
}
STARTS = ("splade", "minilm-dot", "minilm")
DATASETS = {
    "stdlib": "stdlib (in domain)",
    "sklearn": "scikit-learn (out of domain)",
    "scifact": "SciFact (in domain)",
    "cranfield": "Cranfield (out of domain)",
}
HEADS = ("cosine", "dot", "qnorm", "dnorm", "learnable")


def order(value: str, known: Sequence[str]) -> tuple[int, str]:
    return (known.index(value) if value in known else len(known), value)


def ordered_rows(sweep: StoredSweep, groups: Sequence[str]) -> list[StartRow]:
    """The starting-point rows of ``groups``, by group, then start and test set in the manuals' order."""
    rows = [r for r in sweep.start_rows if r.group in groups]
    return sorted(
        rows, key=lambda r: (list(groups).index(r.group), order(r.start, STARTS), order(r.dataset, list(DATASETS)))
    )


def _signed_range(values: Sequence[float]) -> str:
    return f"{min(values):+.2f} to {max(values):+.2f}"


def _chosen(row: StartRow, head: str) -> str:
    variants = sorted(row.heads[head].chosen)
    return f" <sub>{'/'.join(v.removeprefix('scale') for v in variants)}</sub>" if variants else ""


def head_cell(row: StartRow, head: str, spread: bool, tests: Callable | None = None) -> str:
    result = row.heads.get(head)
    if result is None:
        return ""
    best = max(row.heads, key=lambda h: row.heads[h].mean) == head
    text = f"{100 * result.mean:.2f}" + (f" ± {100 * result.std:.2f}" if spread else "")
    text = (f"**{text}**" if best else text) + _chosen(row, head)
    c = result.comparison
    if c is not None:
        text += f" {mark(c)}{family_mark(c)}" if mark(c) else ""
        text += f" ({difference_text(c)}{tests(c) if tests else ''})"
    return text


def positive_regime(stored: StoredResults) -> str:
    """Both settings, every start and test set: nDCG@10 per head against cosine of the same setting."""
    sweep = stored.sweep(SWEEP)
    head = "| start | test set | untuned d | " + " | ".join(HEADS) + " | d after |"
    lines = [head, "|---" * (len(HEADS) + 4) + "|"]
    for setting, groups in SETTINGS.items():
        lines.append(f"| *{setting}* |" + " |" * (len(HEADS) + 3))
        for row in ordered_rows(sweep, groups):
            after = [float(np.mean(x.cohens_d)) for x in row.heads.values() if x.cohens_d]
            cells = " | ".join(head_cell(row, h, spread=False) for h in HEADS)
            d = row.untuned_norms.get("cohens_d")
            untuned = f"{d:+.2f}" if d is not None else "-"
            label = DATASETS.get(row.dataset, row.dataset)
            lines.append(f"| {row.start} | {label} | {untuned} | {cells} | {_signed_range(after)} |")
    return "\n".join(lines)


def p_and_t(c: Comparison) -> str:
    """The row's Holm p, the whole table's where one was computed (``p_all``), the seed t-test's p."""
    family = f", {p_text(c.p_family, 'p_all')}" if c.p_family is not None else ""
    return f", {p_text(c.p_holm)}{family}" + (f", t={c.p_seeds:.2g}" if c.p_seeds is not None else "")


def demo_code_search(stored: StoredResults) -> str:
    """The demo's code search: the control start (all-MiniLM-L6-v2) at scale 20, the demo's own config."""
    rows = [r for r in ordered_rows(stored.sweep(SWEEP), ("code-search",)) if r.start == "minilm"]
    lines = ["| test set | untuned cosine | " + " | ".join(HEADS) + " |", "|---" * (len(HEADS) + 2) + "|"]
    for row in rows:
        cells = " | ".join(head_cell(row, h, spread=True, tests=p_and_t) for h in HEADS)
        lines.append(f"| {DATASETS.get(row.dataset, row.dataset)} | {100 * row.untuned['cosine']:.2f} | {cells} |")
    return "\n".join(lines)


def untuned(stored: StoredResults) -> str:
    """Each start before fine-tuning: cosine vs dot on the same vectors, and its document norms."""
    lines = ["| start | test set | cosine | dot | Cohen's d | document-norm CV |", "|---" * 6 + "|"]
    for row in ordered_rows(stored.sweep(SWEEP), SETTINGS["scale 20"]):
        norms = row.untuned_norms
        lines.append(
            f"| {row.start} | {DATASETS.get(row.dataset, row.dataset)} | {100 * row.untuned['cosine']:.2f} | "
            f"{100 * row.untuned['dot']:.2f} | {norms['cohens_d']:+.2f} | {norms['document_norm_cv']:.2f} |"
        )
    return "\n".join(lines)


def _trained_lr(sweep: StoredSweep, group: str, start: str) -> float:
    cell = next(c for c in sweep.group(group) if c.cell["model"] == start and c.head == "cosine")
    return float(cell.results["provenance"]["config"]["optim"]["lr"])


def lr_grid_table(sweep: StoredSweep, trained_group: str) -> str:
    """The learning rate of each start, chosen on cosine alone (seed 0, the stdlib dev split, group
    ``lr-grid``), and the rate ``trained_group``'s cosine cells then trained at."""
    scores: dict[str, dict[str, float]] = {}
    for c in sweep.group("lr-grid"):
        (result,) = c.results["metrics"].values()
        scores.setdefault(c.cell["model"], {})[c.cell["variant"]] = 100 * float(result["NDCG@10"])
    variants = sorted({v for s in scores.values() for v in s}, key=lambda v: float(v.removeprefix("lr")))
    lines = [
        "| start | " + " | ".join(v.replace("lr", "lr ") for v in variants) + " | trains at |",
        "|---" * (len(variants) + 2) + "|",
    ]
    for start in sorted(scores, key=lambda s: order(s, STARTS)):
        best = max(scores[start], key=scores[start].get)
        cells = " | ".join(f"**{scores[start][v]:.1f}**" if v == best else f"{scores[start][v]:.1f}" for v in variants)
        rate = _trained_lr(sweep, trained_group, start)
        lines.append(f"| {start} | {cells} | {rate:.0e} |".replace("e-0", "e-"))
    return "\n".join(lines)


def scale_grid_table(sweep: StoredSweep, chosen_group: str) -> str:
    """Each head's loss scale per start as ``chosen_group`` chose it (``choose_variant``): every
    candidate's dev score, from the seed-0 cells."""
    cells = [c for c in sweep.group(chosen_group) if c.cell["seed"] == 0]
    cells.sort(key=lambda c: (order(c.cell["model"], STARTS), order(c.head, HEADS)))
    variants = list(cells[0].cell["chosen"]["scores"])
    head = "| start | head | " + " | ".join(f"scale {v.removeprefix('scale')}" for v in variants) + " | chosen |"
    lines = [head, "|---" * (len(variants) + 3) + "|"]
    for c in cells:
        chosen = c.cell["chosen"]
        scores = " | ".join(
            f"**{100 * chosen['scores'][v]:.1f}**" if v == chosen["variant"] else f"{100 * chosen['scores'][v]:.1f}"
            for v in variants
        )
        lines.append(f"| {c.cell['model']} | {c.head} | {scores} | {chosen['variant'].removeprefix('scale')} |")
    return "\n".join(lines)


def _cases(stored: StoredResults) -> list[PredictorCase]:
    sweep = stored.sweep(SWEEP)
    groups = [g for pair in SETTINGS.values() for g in pair]
    cases = predictor_cases(sweep.cells, ordered_rows(sweep, groups))
    return sorted(cases, key=lambda c: (groups.index(c.group), order(c.start, STARTS)))


def predictor_scores(stored: StoredResults) -> dict[str, dict[str, tuple[int, int]]]:
    """Setting -> {"always <head>": (right, cases)} for its most frequent winner, then (right, cases) per predictor."""
    cases = _cases(stored)
    scores = {}
    for setting, pair in SETTINGS.items():
        own = [c for c in cases if c.group in pair]
        winners = [c.winner for c in own]
        majority = max(sorted(set(winners)), key=winners.count)
        names = dict.fromkeys(n for c in own for n in c.verdicts)
        scores[setting] = {f"always {majority}": (winners.count(majority), len(own))}
        scores[setting] |= {n: (sum(c.verdicts.get(n) == c.winner for c in own), len(own)) for n in names}
    return scores


def predictors(stored: StoredResults) -> str:
    """qnorm vs dnorm per setting and start, each predictor's verdict on the untuned start, and the
    score per setting against always guessing the head that won most often there."""
    cases = _cases(stored)
    names = list(dict.fromkeys(n for c in cases for n in c.verdicts))
    head = "| setting | start | qnorm | dnorm | winner | " + " | ".join(names) + " |"
    lines = [head, "|---" * (5 + len(names)) + "|"]
    for c in cases:
        verdicts = " | ".join(c.verdicts.get(n, "") for n in names)
        lines.append(
            f"| `{c.group}` | {c.start} | {100 * c.qnorm:.2f} | {100 * c.dnorm:.2f} | {c.winner} | {verdicts} |"
        )
    lines += ["", "| setting | the most frequent winner, always | " + " | ".join(names) + " |"]
    lines.append("|---" * (2 + len(names)) + "|")
    for setting, scores in predictor_scores(stored).items():
        right = [f"{a} of {b}" for a, b in scores.values()]
        majority = next(iter(scores)).removeprefix("always ")
        lines.append(f"| {setting} | {majority}: {right[0]} | " + " | ".join(right[1:]) + " |")
    return "\n".join(lines)


def _effective_scales(sweep: StoredSweep, group: str) -> dict[tuple[str, str], list[tuple[float, float]]]:
    """(start, head) -> per run, the effective scale at the first and the last logged training step."""
    out: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for c in sweep.group(group):
        path = c.directory / "metrics.jsonl"
        records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []
        logged = [r["effective_scale"] for r in records if r.get("kind") == "train" and "effective_scale" in r]
        if logged:
            out.setdefault((c.cell["model"], c.head), []).append((logged[0], logged[-1]))
    return out


def _span(values: list[float]) -> str:
    low, high = round(min(values)), round(max(values))
    return f"{low}" if low == high else f"{low}-{high}"


def effective_scale(stored: StoredResults) -> str:
    """At scale 20: scale x E|q|^(1-gq) x E|d|^(1-gd) at the first and last logged step, over the seeds."""
    sweep = stored.sweep(SWEEP)
    tasks = {group: _effective_scales(sweep, group) for group in SETTINGS["scale 20"]}
    lines = [
        "| start | head | " + " | ".join(f"`{g}` first -> last" for g in tasks) + " |",
        "|---" * (2 + len(tasks)) + "|",
    ]
    keys = sorted({k for t in tasks.values() for k in t}, key=lambda k: (order(k[0], STARTS), order(k[1], HEADS)))
    for start, head in keys:
        spans = [
            f"{_span([a for a, _ in runs])} -> {_span([b for _, b in runs])}" if (runs := t.get((start, head))) else "-"
            for t in tasks.values()
        ]
        lines.append(f"| {start} | {head} | " + " | ".join(spans) + " |")
    return "\n".join(lines)


TEST_TIME_GROUPS = {
    "code search test": "code-search",
    "SciFact + Cranfield test": "scifact",
    "stdlib dev": "scale-grid",
}


def test_seconds(stored: StoredResults) -> str:
    """Seconds each start's cells spent testing, mean over the cells (what a plan of a sweep adds to training)."""
    sweep = stored.sweep(SWEEP)
    lines = ["| start | " + " | ".join(TEST_TIME_GROUPS) + " |", "|---" * (1 + len(TEST_TIME_GROUPS)) + "|"]
    for start in STARTS:
        means = [
            np.mean([c.results["timings"]["test_seconds"] for c in sweep.group(group) if c.cell["model"] == start])
            for group in TEST_TIME_GROUPS.values()
        ]
        lines.append(f"| {start} | " + " | ".join(f"{m:.0f} s" for m in means) + " |")
    return "\n".join(lines)


BLOCKS: dict[str, Callable[[StoredResults], str]] = {
    "positive-regime": positive_regime,
    "positive-regime-untuned": untuned,
    "positive-regime-lr-grid": lambda stored: lr_grid_table(stored.sweep(SWEEP), "code-search"),
    "positive-regime-scale-grid": lambda stored: scale_grid_table(stored.sweep(SWEEP), "code-search-dev-scale"),
    "positive-regime-predictors": predictors,
    "positive-regime-effective-scale": effective_scale,
    "demo-code-search": demo_code_search,
    "positive-regime-test-seconds": test_seconds,
}
