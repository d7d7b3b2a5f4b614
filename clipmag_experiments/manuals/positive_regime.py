"""The manuals' tables of the positive-regime sweep (``results/positive_regime``), rendered from its cells.

Every block here is named in README.md or docs/experiments.md (``<!-- results:NAME -->``) and
re-rendered by ``clipmag-report docs`` (:mod:`clipmag_experiments.manuals.sync`).

The numbers in the prose around them are values, ``<!-- value:NAME:ARGUMENT -->text<!-- /value -->``;
the argument picks what the number is of (``pr-mean:scifact/splade/scifact/dot`` is the seed mean of
SPLADE's dot on SciFact in group ``scifact``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

import numpy as np

from clipmag.results.marks import difference_text, family_mark, mark, p_text
from clipmag.results.significance import Comparison, with_family_holm
from clipmag_experiments.manuals.arguments import argument_parts
from clipmag_experiments.report.starts import HeadResult, StartRow
from clipmag_experiments.report.stored import StoredResults, StoredSweep, runs_value
from clipmag_experiments.report.verdicts import PredictorCase, predictor_cases

__all__ = [
    "BLOCKS",
    "VALUES",
    "SWEEP",
    "SETTINGS",
    "head_cell",
    "lr_grid_table",
    "order",
    "ordered_rows",
    "p_and_t",
    "predictor_scores",
    "scale_grid_table",
    "table_holm",
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
SETTING_KEYS = {"scale20": "scale 20", "dev": "each head's dev-chosen scale"}
TASKS = {"code-search": ("stdlib", "sklearn"), "scifact": ("scifact", "cranfield")}
# the groups whose cells are fine-tuned or untuned starts (the grids are selection runs on a dev split)
TESTED = {"code-search-untuned", "scifact-untuned", *(g for pair in SETTINGS.values() for g in pair)}


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


def untuned_table(stored: StoredResults) -> str:
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


def _row(stored: StoredResults, group: str, start: str, dataset: str) -> StartRow:
    for row in stored.sweep(SWEEP).start_rows:
        if (row.group, row.start, row.dataset) == (group, start, dataset):
            return row
    raise ValueError(f"{SWEEP}: no row for group {group!r}, start {start!r}, test set {dataset!r}")


def _head(stored: StoredResults, argument: str, name: str) -> HeadResult:
    group, start, dataset, head = argument_parts(argument, 4, name)
    row = _row(stored, group, start, dataset)
    if head not in row.heads:
        raise ValueError(f"{SWEEP}: group {group!r} has no head {head!r} for {start} on {dataset}")
    return row.heads[head]


def mean(stored: StoredResults, argument: str) -> str:
    """``GROUP/START/DATASET/HEAD``: nDCG@10 x100, mean over seeds."""
    return f"{100 * _head(stored, argument, 'pr-mean').mean:.2f}"


def untuned(stored: StoredResults, argument: str) -> str:
    """``START/DATASET/HEAD``: the start itself (0 steps) under a head, x100."""
    start, dataset, head = argument_parts(argument, 3, "pr-untuned")
    row = next((r for r in stored.sweep(SWEEP).start_rows if (r.start, r.dataset) == (start, dataset)), None)
    if row is None or head not in row.untuned:
        raise ValueError(f"{SWEEP}: no untuned {head} score of {start} on {dataset!r}")
    return f"{100 * row.untuned[head]:.2f}"


def setting_gap(stored: StoredResults, argument: str) -> str:
    """``START/DATASET/HEAD``: the head's mean at scale 20 minus at its dev-chosen scale (x100)."""
    start, dataset, head = argument_parts(argument, 3, "pr-setting-gap")
    task = 0 if dataset in TASKS["code-search"] else 1
    fixed, chosen = (_row(stored, SETTINGS[s][task], start, dataset).heads[head] for s in SETTINGS)
    return f"{100 * (fixed.mean - chosen.mean):.1f}"


def dev_margin(stored: StoredResults, argument: str) -> str:
    """``START/HEAD``: by how much (dev nDCG@10 x100) the chosen scale beat the runner-up on the dev split."""
    start, head = argument_parts(argument, 2, "pr-dev-margin")
    cell = next(
        c
        for c in stored.sweep(SWEEP).group("code-search-dev-scale")
        if c.cell["model"] == start and c.head == head and c.cell["seed"] == 0
    )
    scores = sorted(cell.cell["chosen"]["scores"].values(), reverse=True)
    return f"{100 * (scores[0] - scores[1]):.2f}"


def _marked(stored: StoredResults, setting: str, sign: str) -> list[str]:
    rows = ordered_rows(stored.sweep(SWEEP), SETTINGS[SETTING_KEYS[setting]])
    return [f"{r.start}'s {h} on {DATASETS[r.dataset].split(' (')[0]}" for r in rows for h in r.marked(sign)]


def above(stored: StoredResults, argument: str) -> str:
    """``scale20`` or ``dev``: the heads the corrected query-level test puts above cosine, or none."""
    found = _marked(stored, argument, "▲")
    return ", ".join(found) if found else "none"


def below_count(stored: StoredResults, argument: str) -> str:
    """``scale20`` or ``dev``: how many of the setting's comparisons put a head below cosine."""
    rows = ordered_rows(stored.sweep(SWEEP), SETTINGS[SETTING_KEYS[argument]])
    compared = sum(1 for r in rows for x in r.heads.values() if x.comparison is not None)
    return f"{len(_marked(stored, argument, '▼'))} of {compared}"


def table_holm(stored: StoredResults, setting: str) -> list[tuple[StartRow, str, Comparison]]:
    """(row, head, comparison with ``p_family``) of the setting's every comparison with cosine: Holm
    over the whole setting's table, what a sentence about the table as a whole rests on."""
    rows = ordered_rows(stored.sweep(SWEEP), SETTINGS[SETTING_KEYS[setting]])
    tested = [(r, h, x.comparison) for r in rows for h, x in r.heads.items() if x.comparison is not None]
    return [(r, h, c) for (r, h, _), c in zip(tested, with_family_holm([c for _, _, c in tested]))]


def table_above(stored: StoredResults, argument: str) -> str:
    """``scale20`` or ``dev``: the heads above cosine under Holm over the setting's whole table, or none."""
    found = [
        f"{r.start}'s {h} on {DATASETS[r.dataset].split(' (')[0]}"
        for r, h, c in table_holm(stored, argument)
        if family_mark(c) and c.difference > 0
    ]
    return ", ".join(found) if found else "none"


def table_below(stored: StoredResults, argument: str) -> str:
    """``scale20`` or ``dev``: how many comparisons stay below cosine under Holm over the setting's table."""
    tested = table_holm(stored, argument)
    return f"{sum(1 for _, _, c in tested if family_mark(c) and c.difference < 0)} of {len(tested)}"


def below_by_start(stored: StoredResults, argument: str) -> str:
    """``SETTING/TASK``: the ▼ of the setting's table on the task's test sets, per start
    (``splade 4, minilm-dot 2, minilm 0``)."""
    setting, task = argument_parts(argument, 2, "pr-below-by")
    rows = [r for r in ordered_rows(stored.sweep(SWEEP), SETTINGS[SETTING_KEYS[setting]]) if r.dataset in TASKS[task]]
    starts = dict.fromkeys(r.start for r in rows)
    return ", ".join(f"{s} {sum(len(r.marked('▼')) for r in rows if r.start == s)}" for s in starts)


def unmarked_gains(stored: StoredResults, argument: str) -> str:
    """``scale20`` or ``dev``: how many heads are above cosine in the mean without a mark, of those compared."""
    rows = ordered_rows(stored.sweep(SWEEP), SETTINGS[SETTING_KEYS[argument]])
    comparisons = [x.comparison for r in rows for x in r.heads.values() if x.comparison is not None]
    return f"{sum(1 for c in comparisons if c.difference > 0 and not mark(c))} of {len(comparisons)}"


def _unmarked_detectable(stored: StoredResults, task: str) -> list[float]:
    """The MDE (x100) of both settings' comparisons on ``task`` that found no difference."""
    groups = {g for pair in SETTINGS.values() for g in pair if g.startswith(task)}
    rows = [r for r in stored.sweep(SWEEP).start_rows if r.group in groups]
    return [
        100 * x.comparison.detectable for r in rows for x in r.heads.values() if x.comparison and not mark(x.comparison)
    ]


def detectable(stored: StoredResults, argument: str) -> str:
    """``code-search`` or ``scifact``: the range of the MDE over the comparisons that found no
    difference: how large a difference could have hidden there."""
    values = _unmarked_detectable(stored, argument)
    return f"{min(values):.1f}-{max(values):.1f}"


def detectable_median(stored: StoredResults, argument: str) -> str:
    """``code-search`` or ``scifact``: the median of those MDEs."""
    return f"{float(np.median(_unmarked_detectable(stored, argument))):.1f}"


def predictor(stored: StoredResults, argument: str) -> str:
    """``SETTING/NAME`` (``scale20`` or ``dev``; a predictor, or ``majority``): right on k of n cases."""
    setting, name = argument_parts(argument, 2, "pr-predictor")
    scores = predictor_scores(stored)[SETTING_KEYS[setting]]
    key = next(iter(scores)) if name == "majority" else name
    if key not in scores:
        raise ValueError(f"{SWEEP}: no predictor {name!r} (known: majority, {', '.join(list(scores)[1:])})")
    right, cases = scores[key]
    return f"{key.removeprefix('always ') + ' ' if name == 'majority' else ''}{right} of {cases}"


def untuned_d_max(stored: StoredResults, argument: str = "") -> str:
    """The largest |Cohen's d| of document norms of any start before fine-tuning, on any test set."""
    return f"{max(abs(r.untuned_norms['cohens_d']) for r in stored.sweep(SWEEP).start_rows):.2f}"


def _start_comparisons(stored: StoredResults, argument: str, name: str) -> list:
    group, start = argument_parts(argument, 2, name)
    rows = [r for r in stored.sweep(SWEEP).start_rows if (r.group, r.start) == (group, start)]
    if not rows:
        raise ValueError(f"{SWEEP}: no rows of group {group!r} and start {start!r}")
    return [x.comparison for r in rows for x in r.heads.values() if x.comparison is not None]


def start_below(stored: StoredResults, argument: str) -> str:
    """``GROUP/START``: how many of its heads, over its test sets, the query-level test puts below cosine."""
    comparisons = _start_comparisons(stored, argument, "pr-start-below")
    return f"{sum(mark(c) == '▼' for c in comparisons)} of {len(comparisons)}"


def start_seed_t(stored: StoredResults, argument: str) -> str:
    """``GROUP/START``: how many of the same comparisons the paper's seed t-test finds at p < 0.05."""
    comparisons = _start_comparisons(stored, argument, "pr-start-seed-t")
    return f"{sum(c.p_seeds is not None and c.p_seeds < 0.05 for c in comparisons)} of {len(comparisons)}"


def _tested_rows(stored: StoredResults) -> list[tuple[str, str, str, str, int, dict]]:
    """(group, start, head, dataset, seed, diagnostics) of every untuned or fine-tuned run."""
    out = []
    for c in stored.sweep(SWEEP).cells:
        if c.cell["group"] in TESTED:
            for dataset, result in c.results["metrics"].items():
                out.append(
                    (
                        c.cell["group"],
                        c.cell["model"],
                        c.head,
                        dataset,
                        int(c.cell["seed"]),
                        result.get("diagnostics") or {},
                    )
                )
    return out


def _cohens_d(stored: StoredResults) -> dict[tuple[str, str, str, str], list[float]]:
    runs: dict[tuple[str, str, str, str], list[float]] = {}
    for group, start, head, dataset, _, diag in _tested_rows(stored):
        runs.setdefault((group, start, head, dataset), []).append(float(diag["document_norm_effect"]["cohens_d"]))
    return runs


def d_seed_means(stored: StoredResults, argument: str = "") -> str:
    """The range of Cohen's d of document norms over every start, head, setting and test set, seeds averaged."""
    means = [float(np.mean(v)) for v in _cohens_d(stored).values()]
    return f"{min(means):+.2f} to {max(means):+.2f}"


def d_single_runs(stored: StoredResults, argument: str = "") -> str:
    """The same range over single runs."""
    values = [d for v in _cohens_d(stored).values() for d in v]
    return f"{min(values):+.2f} to {max(values):+.2f}"


def _document_cv(stored: StoredResults, argument: str, name: str, inside: bool) -> str:
    start, head = argument_parts(argument, 2, name)
    values = [
        float(diag["document_norm"]["cv"])
        for _, s, h, _, _, diag in _tested_rows(stored)
        if ((s, h) == (start, head)) == inside
    ]
    return f"{min(values):.2f}-{max(values):.2f}"


def document_cv(stored: StoredResults, argument: str) -> str:
    """``START/HEAD``: the document-norm CV range of that start and head over its runs (both tasks and
    settings, untuned included)."""
    return _document_cv(stored, argument, "pr-cv", inside=True)


def document_cv_others(stored: StoredResults, argument: str) -> str:
    """``START/HEAD``: the same range over every other run."""
    return _document_cv(stored, argument, "pr-cv-others", inside=False)


def cells(stored: StoredResults, argument: str) -> str:
    """``GROUP/GROUP/...``: how many cells those groups hold and how many took an identical finished
    cell's results (``same_run_as``)."""
    groups = argument.split("/")
    own = [c for group in groups for c in stored.sweep(SWEEP).group(group)]
    shared = sum(1 for c in own if c.shared_run)
    return f"{len(own)} cells, {shared} taken"


def package_pairs(stored: StoredResults, argument: str) -> str:
    """``pairs``, ``held_out_copies`` or ``ambiguous``: stage 1's training pairs, or the pairs its
    builder dropped as copies of held-out code or as summaries shared by two functions (manifest)."""
    path = stored.sweep(SWEEP).folder / "stage1" / "package-pairs-manifest.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    if argument == "pairs":
        return f"{manifest['pairs']:,}"
    if argument not in ("held_out_copies", "ambiguous"):
        raise ValueError(f"value pr-package: {argument!r} is none of pairs, held_out_copies, ambiguous")
    return f"{sum(int(p[argument]) for p in manifest['per_package'].values()):,}"


BLOCKS: dict[str, Callable[[StoredResults], str]] = {
    "positive-regime": positive_regime,
    "positive-regime-untuned": untuned_table,
    "positive-regime-lr-grid": lambda stored: lr_grid_table(stored.sweep(SWEEP), "code-search"),
    "positive-regime-scale-grid": lambda stored: scale_grid_table(stored.sweep(SWEEP), "code-search-dev-scale"),
    "positive-regime-predictors": predictors,
    "positive-regime-effective-scale": effective_scale,
    "demo-code-search": demo_code_search,
    "positive-regime-test-seconds": test_seconds,
}
VALUES: dict[str, Callable[[StoredResults, str], str]] = {
    "pr-runs": runs_value(SWEEP),
    "pr-cells": cells,
    "pr-package": package_pairs,
    "pr-mean": mean,
    "pr-untuned": untuned,
    "pr-setting-gap": setting_gap,
    "pr-dev-margin": dev_margin,
    "pr-above": above,
    "pr-below-count": below_count,
    "pr-unmarked-gains": unmarked_gains,
    "pr-table-above": table_above,
    "pr-table-below": table_below,
    "pr-below-by": below_by_start,
    "pr-start-below": start_below,
    "pr-start-seed-t": start_seed_t,
    "pr-mde": detectable,
    "pr-mde-median": detectable_median,
    "pr-predictor": predictor,
    "pr-untuned-d-max": untuned_d_max,
    "pr-d-seed-means": d_seed_means,
    "pr-d-single-runs": d_single_runs,
    "pr-cv": document_cv,
    "pr-cv-others": document_cv_others,
}
