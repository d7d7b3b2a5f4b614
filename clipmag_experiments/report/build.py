"""Assemble ``report.md`` from a sweep folder: tables, figures, predictor verdicts, and a
statement of what the numbers show (derived from the numbers, never written in advance)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from clipmag.registry.evaluations import EVALUATIONS
from clipmag.results.marks import POWER_NOTE, QUERY_TEST, SEED_TEST, mark
from clipmag.storage.folder_lock import FolderLock
from clipmag_experiments.design.protocol import read_protocol
from clipmag_experiments.report import plots
from clipmag_experiments.report.collect import (
    CLIP_METRICS,
    CellResult,
    bright_means,
    bright_suites,
    caption_clusters,
    document_norm_samples,
    evaluation_rows,
    find_cells,
    gamma_trajectories,
    query_outcomes,
    tidy_rows,
)
from clipmag_experiments.report.comparison import comparison_section
from clipmag_experiments.report.curves import learning_curves
from clipmag_experiments.report.floors import floors_table
from clipmag_experiments.report.numerics import check_one_numerics, numerics_line
from clipmag_experiments.report.provenance import check_one_code_state, code_line
from clipmag_experiments.report.starts import start_rows, write_start_rows
from clipmag_experiments.report.starts_section import starting_points_section
from clipmag_experiments.report.tables import TableRow, aggregate, mean_of, to_csv, to_markdown, with_query_tests
from clipmag_experiments.report.verdicts import scorecard
from clipmag_experiments.sweep.caption_layout import read_caption_layouts
from clipmag_experiments.sweep.floors import read_floors

RETRIEVAL = ("NDCG@10", "MRR@10", "Recall@100")
BRIGHT = ("NDCG@10", "Recall@1", "Recall@100")
STS = ("spearman", "spearman_reversed", "asymmetry_gap")
DIAGNOSTICS = ("cohens_d_doc_norm", "document_norm_cv", "query_norm_cv")
PREDICTIONS_FILE = "predict_norm.json"
REPORT_LOCK = ".clipmag-report.lock"  # a report's own lock beside the run folder's


def _groups(table: list[TableRow]) -> list[str]:
    return list(dict.fromkeys(r.group for r in table))


def predictor_section(runs_dir: Path, retrieval: list[TableRow]) -> list[str]:
    """Each predictor's verdict next to the sweep's qnorm-vs-dnorm winner on mean nDCG@10. A group's own
    ``<group>/predict_norm.json`` (predictors run on that group's training data) overrides the sweep's."""
    lines = []
    cases: list[tuple[str, dict[str, str]]] = []
    for group in _groups(retrieval):
        q, d = mean_of(retrieval, group, "NDCG@10", "qnorm"), mean_of(retrieval, group, "NDCG@10", "dnorm")
        if math.isnan(q) or math.isnan(d):
            continue
        winner = "qnorm" if q > d else "dnorm"
        lines.append(
            f"Sweep group `{group}`: mean nDCG@10 qnorm {100 * q:.2f} vs dnorm {100 * d:.2f}, winner **{winner}**."
        )
        path = runs_dir / group / PREDICTIONS_FILE
        path = path if path.is_file() else runs_dir / PREDICTIONS_FILE
        if not path.is_file():
            lines.append(f"- _No predictor output (run scripts/predict_norm.py --output {path})._")
            continue
        data = json.loads(path.read_text())
        cases.append(
            (winner, {n: str(v["verdict"]) for n, v in data.items() if isinstance(v, dict) and "verdict" in v})
        )
        for name, v in data.items():
            if not (isinstance(v, dict) and "verdict" in v):
                continue
            match = "matches" if v["verdict"] == winner else "does not match"
            numbers = ", ".join(
                f"{k} {v[k]:.3g}" for k in ("dcv", "threshold", "kappa_query", "kappa_document") if k in v
            )
            lines.append(
                f"- {name} (`{path.relative_to(runs_dir)}`): predicted **{v['verdict']}** ({numbers}) - {match} "
                f"the sweep's winner. Definition: {v.get('definition', 'n/a')}."
            )
    if not lines:
        return ["_No qnorm/dnorm retrieval results to compare the predictions with._", ""]
    return [*lines, *scorecard(cases), ""]


def findings(retrieval: list[TableRow], sts: list[TableRow], clip: list[TableRow]) -> list[str]:
    """Plain statements computed from the tables."""
    out = []
    for group in _groups(retrieval):
        means = {c: mean_of(retrieval, group, "NDCG@10", c) for r in retrieval if r.group == group for c in r.cells}
        means = {c: m for c, m in means.items() if not math.isnan(m)}
        if "cosine" not in means:
            continue
        best = max(means, key=means.get)
        above = [c for c in means if c != "cosine" and means[c] > means["cosine"]]
        marks = {
            sign: sorted(
                {n for r in retrieval if r.group == group for n, c in r.cells.items() if mark(c.comparison) == sign}
            )
            for sign in ("▲", "▼")
        }
        out.append(
            f"- `{group}`: best mean nDCG@10 is **{best}** ({100 * means[best]:.2f}); "
            f"heads above cosine ({100 * means['cosine']:.2f}) in the mean: {', '.join(above) or 'none'}; "
            "significantly above (Holm within the row) on some test set and metric: "
            f"{', '.join(marks['▲']) or 'none'}, "
            f"below: {', '.join(marks['▼']) or 'none'}."
        )
    for group in _groups(sts):
        means = {c: mean_of(sts, group, "spearman", c) for r in sts if r.group == group for c in r.cells}
        if "cosine" in means:
            below = [c for c in ("qnorm", "dnorm") if c in means and means[c] < means["cosine"]]
            out.append(
                f"- `{group}` (symmetric task): Spearman cosine {100 * means['cosine']:.2f}; "
                + ", ".join(f"{c} {100 * means[c]:.2f}" for c in means if c != "cosine")
                + f". Asymmetric heads below cosine: {', '.join(below) or 'none'}."
            )
    by_metric = {r.metric: r.cells for r in clip}
    for config in by_metric.get("i2t_r1_head", {}):
        i2t, t2i = by_metric["i2t_r1_head"][config].mean, by_metric.get("t2i_r1_head", {}).get(config)
        if t2i is None:
            continue
        t2i = t2i.mean
        verdict = ""
        if min(i2t, t2i) < 0.5 * max(i2t, t2i):
            weak, strong = ("T->I", "I->T") if t2i < i2t else ("I->T", "T->I")
            verdict = f": {weak} collapses relative to {strong}"
        out.append(f"- CLIP `{config}`, head-scored R@1: I->T {100 * i2t:.1f}, T->I {100 * t2i:.1f}{verdict}.")
    return out


def bright_findings(bright: list[TableRow]) -> list[str]:
    """Per group and BRIGHT setting: the best head on the plain task mean of nDCG@10, and those above cosine."""
    out = []
    for row in bright:
        if row.metric != "NDCG@10" or "cosine" not in row.cells:
            continue
        means = {name: cell.mean for name, cell in row.cells.items()}
        best = max(means, key=means.get)
        above = [name for name, value in means.items() if name != "cosine" and value > means["cosine"]]
        out.append(
            f"- `{row.group}` {row.dataset}: best nDCG@10 is **{best}** ({100 * means[best]:.2f}); "
            f"heads above cosine ({100 * means['cosine']:.2f}): {', '.join(above) or 'none'}."
        )
    return out


MAGNITUDE_HEADS = ("dot", "qnorm", "dnorm", "learnable")


def regime_section(retrieval: list[TableRow]) -> list[str]:
    """Which of the paper's regimes each group's tested differences fall in, and what the other would take.

    A gain is a significant one (the query-level test, Holm over the row's heads), never a mean
    that happens to be higher; a group without per-query scores is not tested."""
    lines = []
    for group in _groups(retrieval):
        rows = [r for r in retrieval if r.group == group and r.metric == "NDCG@10" and "cosine" in r.cells]
        tested = [(h, r.dataset, c.comparison) for r in rows for h, c in r.cells.items() if h in MAGNITUDE_HEADS]
        if not tested or any(comparison is None for _, _, comparison in tested):
            continue
        above = sorted({f"{h} ({dataset})" for h, dataset, c in tested if mark(c) == "▲"})
        if above:
            lines.append(f"`{group}`: significantly above cosine on nDCG@10: {', '.join(above)}.")
        else:
            lines.append(
                f"`{group}`: no magnitude head is significantly above cosine on any test set (nDCG@10), "
                "cosine's regime, where the paper's from-scratch runs ended; the MDE beside each difference "
                "says what could hide."
            )
    if lines:
        lines += [
            "",
            "The paper's gains from magnitude (Contriever, RetroMAE: +2 to +5 nDCG@10 on BEIR, +72% on BRIGHT) "
            "came from encoders pretrained without a final normalisation, fine-tuned on 80K-500K MS MARCO pairs for "
            "~32k steps of batch 256; from random init cosine won (magnitude learning, the paper says, needs "
            "retrieval-specialised pretraining or enough data). A "
            "group here differs from those in its start (pretrained for cosine, such as all-MiniLM-L6-v2, whose "
            "pipeline ends in a Normalize layer, or for the dot product, such as SPLADE) and in far less data; the "
            "paper's own protocol, for GPUs, is `configs/sweeps/paper_text.yaml`.",
        ]
    return lines + [""]


def _table_code(cells: list[CellResult], groups: set[str]) -> str:
    return code_line([c for c in cells if c.cell["group"] in groups])


def build_report(runs_dir: str | Path, title: str = "clipmag sweep report", allow_mixed: bool = False) -> Path:
    """Write tables (``table_*.md``/``.csv``), figures and ``report.md`` into ``runs_dir``.

    Refuses cells from more than one code state (commits, a dirty tree, none recorded), or a start
    whose cells computed differently (threads, precision), unless ``allow_mixed``; the
    report names the code behind each table either way. Two reports written into one folder at once
    would interleave their files: the second is refused (a lock of its own, so a report of a sweep
    still running is not)."""
    runs_dir = Path(runs_dir)
    with FolderLock(runs_dir, "report", REPORT_LOCK):
        return _write_report(runs_dir, title, allow_mixed)


def _write_report(runs_dir: Path, title: str, allow_mixed: bool) -> Path:
    cells = find_cells(runs_dir)
    if not cells:
        raise FileNotFoundError(f"{runs_dir}: no finished sweep cells (folders with cell.json and results.json)")
    started = [(start.get("code") or {}).get("commit") or "" for start in read_protocol(runs_dir)]
    check_one_code_state(cells, allow_mixed, started)
    check_one_numerics(cells, allow_mixed)
    rows = tidy_rows(cells)
    suites = bright_suites(cells)  # BRIGHT tasks are averaged apart: its own score is the mean over its tasks
    tasks = [r for r in rows if r.dataset in suites]
    attached, outcomes = evaluation_rows(cells)
    per_query = query_outcomes(cells)
    attached_metrics = tuple(dict.fromkeys(m for e in EVALUATIONS.values() for m in e.metrics))
    tables = {
        "retrieval": with_query_tests(aggregate([r for r in rows if r.dataset not in suites], RETRIEVAL), per_query),
        "bright": aggregate(bright_means(tasks, suites), BRIGHT),
        "bright_tasks": aggregate(tasks, BRIGHT),
        "sts": aggregate(rows, STS),
        "clip": with_query_tests(
            aggregate(rows, CLIP_METRICS), per_query, caption_clusters(cells, read_caption_layouts(runs_dir))
        ),
        "diagnostics": aggregate(rows, DIAGNOSTICS),
        "evaluations": with_query_tests(aggregate(attached, attached_metrics), outcomes),
    }
    for name, table in tables.items():
        if table:
            to_csv(table, runs_dir / f"table_{name}.csv")
    figures: dict[str, Any] = {
        "nDCG@10 per head and dataset": plots.metric_bars(
            tables["retrieval"] + tables["bright"], "NDCG@10", runs_dir / "fig_ndcg.png", "nDCG@10 (test)"
        ),
        "STS Spearman per head": plots.metric_bars(
            tables["sts"], "spearman", runs_dir / "fig_sts.png", "Spearman, argument order (a, b)"
        ),
        "CLIP R@1 in both directions": plots.clip_recall(tables["clip"], runs_dir / "fig_clip_r1.png"),
        "Document norms, relevant vs non-relevant": plots.norm_histograms(
            document_norm_samples(cells), runs_dir / "fig_doc_norms.png"
        ),
        "Learnable-head gamma trajectories": plots.gamma_trajectories(
            gamma_trajectories(cells), runs_dir / "fig_gammas.png"
        ),
    }
    for path in learning_curves(runs_dir, cells):  # the budgets of the protocol's compared groups
        figures[f"Learning curve, {path.stem.removeprefix('fig_curve_').replace('_', ' on ', 1)}"] = path
    seeds = {int(c.cell["seed"]) for c in cells}
    parts = [
        f"# {title}",
        "",
        f"{len(cells)} finished runs under `{runs_dir}`, seeds {sorted(seeds)}. Scores x100, "
        "diagnostics as they are; mean ± std over seeds; best per row in bold. Against cosine: (change, "
        "where the runs kept per-query scores Δ the mean per-query difference x100 with its 95% bootstrap interval "
        f"and {POWER_NOTE}, p= the {QUERY_TEST} (▲/▼ mark it); t= the {SEED_TEST}, with 2+ seeds).",
        "",
        numerics_line(cells),
        "",
        code_line(cells),
        "",
    ]
    if len(seeds) < 2:
        parts += ["With one seed no difference is tested for significance; gaps of a point or two may be noise.", ""]
    sections = [
        ("Retrieval (test splits)", "retrieval"),
        ("BRIGHT: plain mean over its tasks", "bright"),
        ("BRIGHT per task", "bright_tasks"),
        ("Symmetric task (STS-style)", "sts"),
        ("CLIP: head-aware retrieval in both directions", "clip"),
        ("Magnitude diagnostics", "diagnostics"),
        ("Evaluations of the exports (RAG)", "evaluations"),
    ]
    notes = {
        "evaluations": "Each run's export retrieves with its own head; the question is the unit of the p-value "
        "(McNemar's exact test on 0/1 outcomes with one seed, the randomisation test on per-question seed means "
        "with several), Holm-corrected over the heads.",
        "clip": "Text -> image rows are tested over images, not captions: the captions of one image all search "
        "for it, so the signs flip per image and the interval resamples images (captions grouped by the test "
        "set's layout, each image's captions in a row).",
    }
    starts = start_rows(cells)
    for heading, key in sections:
        if tables[key]:
            parts += [f"## {heading}", "", _table_code(cells, {r.group for r in tables[key]}), ""]
            parts += [*([notes[key], ""] if key in notes else []), to_markdown(tables[key])]
        if key == "clip" and tables[key] and (floors := read_floors(runs_dir)) is not None:
            parts += ["What the evaluated images give without learning (x100; the set's baselines.json):", ""]
            parts += [floors_table(floors), ""]
        if key == "retrieval" and starts:
            write_start_rows(starts, runs_dir / "starts.json")
            parts += [
                "## Starting points: untuned and fine-tuned, per head",
                "",
                _table_code(cells, {r.group for r in starts}),
            ]
            parts += ["", *starting_points_section(cells, starts)]
            parts += ["## The protocol's comparison", "", *comparison_section(runs_dir, starts)]
    parts += ["## What these numbers show", "", *findings(tables["retrieval"], tables["sts"], tables["clip"])]
    parts += [*bright_findings(tables["bright"]), ""]
    parts += ["## Regime", "", *regime_section(tables["retrieval"])]
    parts += ["## Predicting qnorm vs dnorm before fine-tuning", "", *predictor_section(runs_dir, tables["retrieval"])]
    parts += ["## Figures", ""]
    parts += [f"### {caption}\n\n![{caption}]({path.name})\n" for caption, path in figures.items() if path is not None]
    report = runs_dir / "report.md"
    report.write_text("\n".join(parts))
    return report
