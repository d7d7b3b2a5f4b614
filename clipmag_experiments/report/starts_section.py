"""The report's starting-point section in markdown: per fine-tuned group a table of the start rows
(:mod:`clipmag_experiments.report.starts`), then per start its significant winners, the predictors'
verdicts against the measured winner (:mod:`clipmag_experiments.report.verdicts`), the variants
chosen on dev and the learned exponents.
"""

from __future__ import annotations

import math

import numpy as np

from clipmag.results.marks import POWER_NOTE, QUERY_TEST, SEED_TEST, difference_text, mark
from clipmag_experiments.report.collect import CellResult, learnable_trajectories
from clipmag_experiments.report.starts import StartRow
from clipmag_experiments.report.verdicts import predictor_cases, scorecards

__all__ = ["starting_points_section"]


def _fmt_p(p: float | None) -> str:
    return "n/a" if p is None else f"{p:.3f}" if p >= 0.001 else f"{p:.0e}"


def _head_cell(row: StartRow, name: str) -> str:
    r = row.heads.get(name)
    if r is None:
        return ""
    text = f"{100 * r.mean:.2f} ± {100 * r.std:.2f}"
    c = r.comparison
    if c is not None:
        text += f" {mark(c)}" if mark(c) else ""
        text += f" ({difference_text(c)}, p {_fmt_p(c.p_holm)} / t {_fmt_p(c.p_seeds)})"
    best = max(row.heads, key=lambda h: row.heads[h].mean)
    return f"**{text}**" if name == best else text


def _table(rows: list[StartRow]) -> list[str]:
    heads = list(dict.fromkeys(h for r in rows for h in r.heads))
    lines = [
        "| start | test set | untuned cosine / dot | untuned d / CV | " + " | ".join(heads) + " | d after (per head) |",
        "|---" * (5 + len(heads)) + "|",
    ]
    for r in rows:
        untuned = " / ".join(f"{100 * r.untuned[h]:.2f}" if h in r.untuned else "-" for h in ("cosine", "dot"))
        norms = r.untuned_norms
        d_cv = f"{norms.get('cohens_d', math.nan):+.2f} / {norms.get('document_norm_cv', math.nan):.3f}"
        after = ", ".join(f"{h} {np.mean(x.cohens_d):+.2f}" for h, x in r.heads.items() if x.cohens_d)
        cells = " | ".join(_head_cell(r, h) for h in heads)
        lines.append(f"| {r.start} | {r.dataset} | {untuned} | {d_cv} | {cells} | {after} |")
    return lines


def _start_lines(cells: list[CellResult], rows: list[StartRow]) -> list[str]:
    """Per start: significant winners, predictor verdicts vs the qnorm/dnorm winner (scored per
    setting), the variants chosen on dev, learned gammas."""
    lines = []
    trajectories = learnable_trajectories(cells)
    for r in rows:
        best = max(r.heads, key=lambda h: r.heads[h].mean)
        lines.append(
            f"- `{r.start}` on {r.dataset}: best **{best}**; significantly above cosine: "
            f"{', '.join(r.marked('▲')) or 'none'}; below: {', '.join(r.marked('▼')) or 'none'}."
        )
    cases = {(c.group, c.start): c for c in predictor_cases(cells, rows)}
    for group, start in dict.fromkeys((r.group, r.start) for r in rows):
        case = cases.get((group, start))
        if case is not None:
            said = ", ".join(
                f"{name} said {v} ({'right' if v == case.winner else 'wrong'})" for name, v in case.verdicts.items()
            )
            lines.append(
                f"- `{group}` / `{start}`: qnorm {100 * case.qnorm:.2f} vs dnorm {100 * case.dnorm:.2f} -> "
                f"{case.winner}; {said}."
            )
        first = next(r for r in rows if (r.group, r.start) == (group, start))
        chosen = {h: x.chosen for h, x in first.heads.items() if x.chosen}
        if chosen:
            text = ", ".join(f"{h} {'/'.join(sorted(v))}" for h, v in chosen.items())
            lines.append(f"- `{group}` / `{start}`: variants chosen on the selection group's dev split: {text}.")
        gammas = [
            points[-1][1:]
            for c, points in trajectories
            if points and c.cell.get("group") == group and c.cell.get("model") == start
        ]
        if gammas:
            text = ", ".join(f"({gq:.3f}, {gd:.3f})" for gq, gd in gammas)
            lines.append(f"- `{group}` / `{start}`: learnable (gq, gd) after training, per seed: {text}.")
    return lines + scorecards(list(cases.values()))


def starting_points_section(cells: list[CellResult], rows: list[StartRow]) -> list[str]:
    """Markdown lines for :func:`start_rows`' rows: one table per fine-tuned group, then the statements."""
    if not rows:
        return []
    parts = [
        "nDCG@10 x100, mean ± std over seeds. Against cosine: Δ, the mean per-query difference x100 with its 95% "
        f"bootstrap interval over queries; {POWER_NOTE}; ▲/▼ and p: the {QUERY_TEST}; t: the {SEED_TEST}. "
        "Untuned: the start "
        "itself (0 steps); d: Cohen's d of document norms (relevant vs a seeded non-relevant sample), before "
        "fine-tuning (untuned) and after it (per head, mean over seeds); CV: document-norm CV.",
        "",
    ]
    for group in dict.fromkeys(r.group for r in rows):
        parts += [f"### `{group}`", "", *_table([r for r in rows if r.group == group]), ""]
    return parts + _start_lines(cells, rows) + [""]
