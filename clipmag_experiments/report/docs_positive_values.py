"""The numbers in the prose about the positive-regime sweep, each rendered from its cells.

A manual writes one as ``<!-- value:NAME:ARGUMENT -->text<!-- /value -->``; the argument picks
what the number is of (``pr-mean:scifact/splade/scifact/dot`` is the seed mean of SPLADE's dot on
SciFact in group ``scifact``). :mod:`clipmag_experiments.report.docs_sync` renders and checks them.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import numpy as np

from clipmag.results.marks import family_mark, mark
from clipmag.results.significance import Comparison, with_family_holm
from clipmag_experiments.report.docs_positive import DATASETS, SETTINGS, SWEEP, ordered_rows, predictor_scores
from clipmag_experiments.report.starts import HeadResult, StartRow
from clipmag_experiments.report.stored import StoredResults, runs_value

__all__ = ["VALUES"]

SETTING_KEYS = {"scale20": "scale 20", "dev": "each head's dev-chosen scale"}
TASKS = {"code-search": ("stdlib", "sklearn"), "scifact": ("scifact", "cranfield")}
# the groups whose cells are fine-tuned or untuned starts (the grids are selection runs on a dev split)
TESTED = {"code-search-untuned", "scifact-untuned", *(g for pair in SETTINGS.values() for g in pair)}


def _parts(argument: str, count: int, name: str) -> list[str]:
    parts = argument.split("/")
    if len(parts) != count:
        raise ValueError(f"value {name}: expected {count} parts separated by '/', got {argument!r}")
    return parts


def _row(stored: StoredResults, group: str, start: str, dataset: str) -> StartRow:
    for row in stored.sweep(SWEEP).start_rows:
        if (row.group, row.start, row.dataset) == (group, start, dataset):
            return row
    raise ValueError(f"{SWEEP}: no row for group {group!r}, start {start!r}, test set {dataset!r}")


def _head(stored: StoredResults, argument: str, name: str) -> HeadResult:
    group, start, dataset, head = _parts(argument, 4, name)
    row = _row(stored, group, start, dataset)
    if head not in row.heads:
        raise ValueError(f"{SWEEP}: group {group!r} has no head {head!r} for {start} on {dataset}")
    return row.heads[head]


def mean(stored: StoredResults, argument: str) -> str:
    """``GROUP/START/DATASET/HEAD``: nDCG@10 x100, mean over seeds."""
    return f"{100 * _head(stored, argument, 'pr-mean').mean:.2f}"


def untuned(stored: StoredResults, argument: str) -> str:
    """``START/DATASET/HEAD``: the start itself (0 steps) under a head, x100."""
    start, dataset, head = _parts(argument, 3, "pr-untuned")
    row = next((r for r in stored.sweep(SWEEP).start_rows if (r.start, r.dataset) == (start, dataset)), None)
    if row is None or head not in row.untuned:
        raise ValueError(f"{SWEEP}: no untuned {head} score of {start} on {dataset!r}")
    return f"{100 * row.untuned[head]:.2f}"


def setting_gap(stored: StoredResults, argument: str) -> str:
    """``START/DATASET/HEAD``: the head's mean at scale 20 minus at its dev-chosen scale (x100)."""
    start, dataset, head = _parts(argument, 3, "pr-setting-gap")
    task = 0 if dataset in TASKS["code-search"] else 1
    fixed, chosen = (_row(stored, SETTINGS[s][task], start, dataset).heads[head] for s in SETTINGS)
    return f"{100 * (fixed.mean - chosen.mean):.1f}"


def dev_margin(stored: StoredResults, argument: str) -> str:
    """``START/HEAD``: by how much (dev nDCG@10 x100) the chosen scale beat the runner-up on the dev split."""
    start, head = _parts(argument, 2, "pr-dev-margin")
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
    setting, task = _parts(argument, 2, "pr-below-by")
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
    setting, name = _parts(argument, 2, "pr-predictor")
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
    group, start = _parts(argument, 2, name)
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
    start, head = _parts(argument, 2, name)
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
