"""Aggregate tidy rows into a paper-style table: mean +- std over seeds, change vs cosine, the paper's
paired t-test over seed means vs cosine, best per row in bold. Where the runs kept per-query scores
(retrieval, CLIP, RAG) each row also gets the query-level test with Holm's correction over its heads
and the mark it earns (:func:`with_query_tests`, :mod:`clipmag.results.significance`)."""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from clipmag.results.marks import difference_text, family_mark, mark, p_text
from clipmag.results.significance import Comparison, compare_with_baseline, paired_seed_p, with_family_holm
from clipmag.scoring.head_config import HEAD_NAMES
from clipmag_experiments.report.collect import QueryClusters, QuestionOutcomes, Row

BASELINE = "cosine"
LOWER_IS_BETTER = {"asymmetry_gap"}
# Diagnostics describe a model; no head "wins" them and a relative change means nothing.
DESCRIPTIVE = {"cohens_d_doc_norm", "document_norm_cv", "query_norm_cv", "image_norm_d", "text_norm_d", "asymmetry_gap"}
HEAD_ORDER = HEAD_NAMES


def _column_order(names: list[str]) -> list[str]:
    """The paper's head order first, then anything else (variants) as first seen."""
    known = [h for h in HEAD_ORDER if h in names]
    return known + [n for n in names if n not in known]


@dataclass
class Cell:
    mean: float
    std: float
    n: int
    change_vs_baseline: float | None
    p_seeds: float | None  # the paper's paired t-test over seed means
    comparison: Comparison | None = None  # the query-level test, when per-query scores exist
    best: bool = False


@dataclass
class TableRow:
    group: str
    model: str
    dataset: str
    metric: str
    cells: dict[str, Cell]


def aggregate(rows: list[Row], metrics: tuple[str, ...]) -> list[TableRow]:
    """One table row per (group, model, dataset, metric), one cell per head / variant."""
    by_key: dict[tuple, dict[str, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    order: dict[tuple, list[str]] = defaultdict(list)
    for r in rows:
        if r.metric not in metrics:
            continue
        key = (r.group, r.model, r.dataset, r.metric)
        by_key[key][r.config][r.seed] = r.value
        if r.config not in order[key]:
            order[key].append(r.config)
    table = []
    for key in sorted(by_key, key=lambda k: (k[0], k[1], k[2], metrics.index(k[3]))):
        configs = by_key[key]
        baseline = configs.get(BASELINE)
        cells = {}
        for name in order[key]:
            vals = np.array(list(configs[name].values()), dtype=float)
            mean = float(vals.mean())
            change = None
            if baseline and name != BASELINE and key[3] not in DESCRIPTIVE:
                base_mean = float(np.mean(list(baseline.values())))
                change = (mean - base_mean) / abs(base_mean) if base_mean else None
            p = paired_seed_p(configs[name], baseline) if baseline and name != BASELINE else None
            cells[name] = Cell(mean, float(vals.std(ddof=1)) if vals.size > 1 else 0.0, int(vals.size), change, p)
        if key[3] not in DESCRIPTIVE or key[3] in LOWER_IS_BETTER:
            pick = min if key[3] in LOWER_IS_BETTER else max
            cells[pick(cells, key=lambda n: cells[n].mean)].best = True
        table.append(TableRow(*key, {n: cells[n] for n in _column_order(list(cells))}))
    return table


def with_query_tests(
    table: list[TableRow], outcomes: QuestionOutcomes, clusters: QueryClusters | None = None
) -> list[TableRow]:
    """Give each cell with per-query scores its query-level comparison against cosine.

    The family Holm corrects is the row: every head compared with cosine on that test set and
    metric. Rows without per-query outcomes (STS; CLIP metrics a run keeps no outcome of, e.g. R@10)
    keep only the seed-level t-test. ``clusters`` (:func:`~clipmag_experiments.report.collect.caption_clusters`)
    makes the image, not the caption, the unit where captions share one."""
    for row in table:
        systems = {
            name: {
                seed: {q: v[row.metric] for q, v in queries.items() if row.metric in v}
                for seed, queries in runs.items()
            }
            for name in row.cells
            if (runs := outcomes.get((row.group, row.model, row.dataset, name)))
        }
        shared = (clusters or {}).get((row.group, row.model, row.dataset))
        for name, comparison in compare_with_baseline(systems, BASELINE, shared).items():
            row.cells[name].comparison = comparison
    return table


def with_table_holm(table: list[TableRow]) -> list[TableRow]:
    """Every query-level comparison of ``table`` with Holm over all of them (``p_family``), for a
    claim about the whole table rather than one row."""
    cells = [cell for row in table for cell in row.cells.values() if cell.comparison is not None]
    for cell, comparison in zip(cells, with_family_holm([c.comparison for c in cells])):
        cell.comparison = comparison
    return table


def tested(table: list[TableRow]) -> int:
    """How many query-level comparisons ``table`` holds (the size of its whole-table Holm family)."""
    return sum(1 for row in table for cell in row.cells.values() if cell.comparison is not None)


def _fmt(cell: Cell | None, scale: float) -> str:
    if cell is None:
        return ""
    digits = 2 if scale != 1 else 3
    text = f"{cell.mean * scale:.{digits}f}"
    if cell.n > 1:
        text += f" ± {cell.std * scale:.{digits}f}"
    if mark(cell.comparison):
        text += f" {mark(cell.comparison)}{family_mark(cell.comparison)}"
    if cell.change_vs_baseline is not None:
        c = cell.comparison
        tests = [difference_text(c), p_text(c.p_holm)] if c else []
        tests += [p_text(c.p_family, "p_all")] if c and c.p_family is not None else []
        tests += [f"t={cell.p_seeds:.3f}"] if cell.p_seeds is not None else []
        text += f" ({', '.join([f'{cell.change_vs_baseline:+.0%}', *tests])})"
    return f"**{text}**" if cell.best else text


def to_markdown(table: list[TableRow]) -> str:
    """Scores x100 (percent points, as the paper reports them); diagnostics as they are."""
    if not table:
        return "_no results_\n"
    columns = _column_order(list(dict.fromkeys(name for row in table for name in row.cells)))
    models = any(row.model != "default" for row in table)  # a model column only when a sweep names models
    head = ["group", *(["model"] if models else []), "dataset", "metric", *columns]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for row in table:
        scale = 1.0 if row.metric in DESCRIPTIVE else 100.0
        cells = " | ".join(_fmt(row.cells.get(c), scale) for c in columns)
        model = f"{row.model} | " if models else ""
        lines.append(f"| {row.group} | {model}{row.dataset} | {row.metric} | {cells} |")
    return "\n".join(lines) + "\n"


def to_csv(table: list[TableRow], path: str | Path) -> Path:
    path = Path(path)
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(
            [
                "group",
                "model",
                "dataset",
                "metric",
                "config",
                "mean",
                "std",
                "n",
                "change_vs_cosine",
                "p_seeds_vs_cosine",
                "difference_vs_cosine",
                "difference_ci_low",
                "difference_ci_high",
                "detectable_difference",
                "p_query_vs_cosine",
                "p_query_holm_vs_cosine",
                "mark",
                "best",
            ]
        )
        for row in table:
            for name, c in row.cells.items():
                writer.writerow(
                    [
                        row.group,
                        row.model,
                        row.dataset,
                        row.metric,
                        name,
                        c.mean,
                        c.std,
                        c.n,
                        "" if c.change_vs_baseline is None else c.change_vs_baseline,
                        "" if c.p_seeds is None else c.p_seeds,
                        *(
                            (q.difference, q.ci_low, q.ci_high, q.detectable, q.p, q.p_holm)
                            if (q := c.comparison)
                            else ("", "", "", "", "", "")
                        ),
                        mark(c.comparison),
                        c.best,
                    ]
                )
    return path


def mean_of(table: list[TableRow], group: str, metric: str, config: str) -> float:
    """Mean of a configuration's cell over every dataset row of ``group`` / ``metric`` (NaN if none)."""
    values = [
        row.cells[config].mean for row in table if row.group == group and row.metric == metric and config in row.cells
    ]
    return float(np.mean(values)) if values else math.nan
