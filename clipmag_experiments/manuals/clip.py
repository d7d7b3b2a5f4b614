"""The CLIP sweeps' tables and marks of docs/clip.md and the README, rendered from their cells:
``results/clip_losses`` (the digits, ``configs/sweeps/clip_losses.yaml``) and
``results/clip_emoji_first`` (the emoji set under its first, superseded protocol, each head's scale
chosen on dev; the rebuilt protocol archives to ``results/clip_emoji``, so its cells never join the
first protocol's table). Each trains the four fixed heads under InfoNCE in both directions, in one
direction, SigLIP and a locked image tower (LiT). The blocks ``clip-losses`` and ``clip-emoji`` are
the report's CLIP tables of those cells - I->T and T->I recall with the model's head and with
cosine, zero-shot accuracy both ways, each head against cosine of its group with the query-level
test (text -> image with the image as the unit, Holm over the row's heads and over the whole table)
and the seed t-test - and the marks ``clip-*`` and ``emoji-*`` read single values of them, so the
pages show what the stored cells give, nothing typed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from clipmag.results.marks import family_mark
from clipmag.results.marks import verdict as verdict_of
from clipmag_experiments.report.collect import CLIP_METRICS, caption_clusters, query_outcomes, tidy_rows
from clipmag_experiments.report.floors import floors_table
from clipmag_experiments.report.stored import StoredResults, runs_value, time_value
from clipmag_experiments.report.tables import (
    Cell,
    TableRow,
    aggregate,
    tested,
    to_markdown,
    with_query_tests,
    with_table_holm,
)
from clipmag_experiments.sweep.caption_layout import read_caption_layouts
from clipmag_experiments.sweep.floors import read_floors

__all__ = ["BLOCKS", "VALUES"]

# the stored CLIP sweeps and the prefix of their marks in the manuals
SWEEPS = {"clip": "clip_losses", "emoji": "clip_emoji_first"}
MAGNITUDE_HEADS = ("dot", "qnorm", "dnorm")
# CLIP-benchmark's result file of every compared emoji run on the shifted domain, in
# results/clip_emoji_first/shifted/; its metrics by the names the page prints
SHIFTED = "shifted"
SHIFTED_METRICS = {
    "acc1": "zero-shot top-1",
    "mean_per_class_recall": "zero-shot mean per-class recall",
    "text_retrieval_recall@1": "I->T R@1",
    "image_retrieval_recall@1": "T->I R@1",
    "text_retrieval_recall@5": "I->T R@5",
    "image_retrieval_recall@5": "T->I R@5",
}
SHIFTED_RUNS = "runs/clip_emoji/{infonce-sym,infonce-i2t,siglip,lit}/default/*/seed*"
SHIFTED_COMMAND = " && ".join(
    "python scripts/eval_clip_benchmark.py eval --model_type clipmag --model emoji --pretrained "
    f"{SHIFTED_RUNS} --dataset wds/emoji_grey_{task} --dataset_root 'data/emoji/wds/{{dataset}}' {options} "
    "--num_workers 0 --no_amp --head model --output 'results/clip_emoji_first/shifted/{dataset}_{pretrained}.json'"
    for task, options in (("classification", ""), ("retrieval", "--task zeroshot_retrieval --recall_k 1 5"))
)


def tested_table(stored: StoredResults, sweep_name: str) -> list[TableRow]:
    """Every compared group's CLIP metrics per head (the selection groups only chose settings) with
    the query-level tests (text -> image with the image as the unit) and Holm over the whole table;
    computed once per store (the tests take seconds)."""
    sweep = stored.sweep(sweep_name)

    def compute() -> list[TableRow]:
        cells = sweep.compared()
        rows = aggregate(tidy_rows(cells), CLIP_METRICS)
        clusters = caption_clusters(cells, read_caption_layouts(sweep.folder))
        return with_table_holm(with_query_tests(rows, query_outcomes(cells), clusters))

    return sweep.derived("tested-table", compute)


def _cell(stored: StoredResults, sweep_name: str, argument: str) -> Cell:
    """``GROUP/METRIC/HEAD``: one cell of a CLIP table (its one test set)."""
    parts = argument.split("/")
    if len(parts) != 3:
        raise ValueError(f"{sweep_name}: expected GROUP/METRIC/HEAD, got {argument!r}")
    group, metric, head = parts
    for row in tested_table(stored, sweep_name):
        if (row.group, row.metric) == (group, metric) and head in row.cells:
            return row.cells[head]
    raise ValueError(f"{sweep_name}: no {head} cell of {metric} in group {group!r}")


def _verdict(stored: StoredResults, sweep_name: str, argument: str) -> str:
    """The row's mark in words, with ``†`` where it also survives Holm over the whole table: a
    sentence that reads several rows rests on the table's family, not on one row's."""
    comparison = _cell(stored, sweep_name, argument).comparison
    return verdict_of(comparison) + family_mark(comparison)


def _values(sweep_name: str) -> dict[str, Callable[[StoredResults, str], str]]:
    """The marks of one stored CLIP sweep, by their name after the sweep's prefix."""

    def verdict(stored: StoredResults, argument: str) -> str:
        """``GROUP/METRIC/HEAD``: ``above`` / ``below`` / ``level`` - the row's mark against cosine
        (``above†``: it survives the whole table's Holm too)."""
        return _verdict(stored, sweep_name, argument)

    def verdicts(stored: StoredResults, argument: str) -> str:
        """``GROUP/METRIC``: every magnitude head's mark against cosine, in words (``dot below,
        qnorm below, dnorm level``)."""
        return ", ".join(f"{head} {_verdict(stored, sweep_name, f'{argument}/{head}')}" for head in MAGNITUDE_HEADS)

    def mean(stored: StoredResults, argument: str) -> str:
        """``GROUP/METRIC/HEAD``: the metric x100, mean over seeds."""
        return f"{100 * _cell(stored, sweep_name, argument).mean:.2f}"

    def spread(stored: StoredResults, argument: str) -> str:
        """``GROUP/METRIC/HEAD``: the metric's standard deviation over seeds, x100."""
        return f"{100 * _cell(stored, sweep_name, argument).std:.2f}"

    def difference(stored: StoredResults, argument: str) -> str:
        """``GROUP/METRIC/HEAD``: the mean per-query difference to cosine, x100."""
        comparison = _cell(stored, sweep_name, argument).comparison
        if comparison is None:
            raise ValueError(f"{sweep_name}: {argument} has no query-level test against cosine")
        return f"{100 * comparison.difference:+.2f}"

    def survivors(stored: StoredResults, argument: str = "") -> str:
        """``40 of 96``: the table's marks that survive Holm over all of its tests (†)."""
        table = tested_table(stored, sweep_name)
        found = sum(1 for row in table for cell in row.cells.values() if family_mark(cell.comparison))
        return f"{found} of {tested(table)}"

    def tests(stored: StoredResults, argument: str = "") -> str:
        """How many query-level tests the table holds: the family of its whole-table Holm."""
        return str(tested(tested_table(stored, sweep_name)))

    def chosen(stored: StoredResults, argument: str) -> str:
        """``GROUP``: each head's setting as its dev choice made it (``cosine scale14, dot scale1
        (grid edge; scale30 diverged)``), read from the seed-0 cells' ``cell.json``; a choice left
        on its grid's edge says so, as does a candidate whose run diverged."""
        picks = {}
        for c in stored.sweep(sweep_name).group(argument):
            choice = c.cell.get("chosen")
            if choice is None:
                raise ValueError(f"{sweep_name}: group {argument!r} takes no setting chosen on dev")
            notes = ["grid edge"] if choice.get("at_grid_edge") else []
            notes += [f"{', '.join(choice['diverged'])} diverged"] if choice.get("diverged") else []
            picks[c.cell["head"]] = choice["variant"] + (f" ({'; '.join(notes)})" if notes else "")
        return ", ".join(f"{head} {picks[head]}" for head in ("cosine", *MAGNITUDE_HEADS) if head in picks)

    return {
        "runs": runs_value(sweep_name),
        "minutes": time_value(sweep_name, "minutes"),
        "verdict": verdict,
        "verdicts": verdicts,
        "mean": mean,
        "chosen": chosen,
        "spread": spread,
        "difference": difference,
        "survivors": survivors,
        "tests": tests,
    }


def _table(sweep_name: str) -> Callable[[StoredResults], str]:
    def table(stored: StoredResults) -> str:
        """Every group's CLIP metrics per head, as the sweep report tabulates them, with the floors of
        its evaluated images under it where the sweep stored them (``baselines.json``)."""
        rendered = to_markdown(tested_table(stored, sweep_name)).rstrip("\n")
        floors = read_floors(stored.sweep(sweep_name).folder)
        return rendered if floors is None else f"{rendered}\n\n{floors_table(floors)}"

    return table


def shifted_scores(stored: StoredResults) -> dict[tuple[str, str], dict[str, list[float]]]:
    """(group, metric) -> head -> the seeds' scores x100 on the shifted domain, from CLIP-benchmark's
    result files (empty when none is stored)."""
    scores: dict[tuple[str, str], dict[str, list[float]]] = {}
    for path in sorted((stored.root / SWEEPS["emoji"] / SHIFTED).glob("*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        *_, group, _, head, _ = Path(record["pretrained"]).parts  # runs/clip_emoji/GROUP/MODEL/HEAD/seedN
        for metric, value in record["metrics"].items():
            if metric in SHIFTED_METRICS:
                scores.setdefault((group, metric), {}).setdefault(head, []).append(100 * float(value))
    return scores


def shifted_table(stored: StoredResults) -> str:
    """The emoji runs on the shifted domain, each scored by CLIP-benchmark with its own head: mean
    ± std over seeds per loss and head (reported, not tested, as the protocol fixes)."""
    scores = shifted_scores(stored)
    if not scores:
        return f"Not measured yet: `{SHIFTED_COMMAND}`, then `python scripts/report.py docs`."
    heads = ("cosine", *MAGNITUDE_HEADS)
    lines = ["| group | metric | " + " | ".join(heads) + " |", "|" + "---|" * (len(heads) + 2)]
    order = {m: i for i, m in enumerate(SHIFTED_METRICS)}
    for (group, metric), by_head in sorted(scores.items(), key=lambda item: (item[0][0], order[item[0][1]])):
        cells = [
            f"{np.mean(v):.2f} ± {np.std(v, ddof=1) if len(v) > 1 else 0.0:.2f}" if (v := by_head.get(h)) else "-"
            for h in heads
        ]
        lines.append(f"| {group} | {SHIFTED_METRICS[metric]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def shifted_best(stored: StoredResults, metric: str) -> str:
    """``METRIC`` (CLIP-benchmark's name): the highest seed mean of any loss and head on the shifted domain."""
    if metric not in SHIFTED_METRICS:
        raise ValueError(f"emoji-shifted-best: {metric!r} is none of {', '.join(SHIFTED_METRICS)}")
    means = [
        float(np.mean(v)) for (_, m), by_head in shifted_scores(stored).items() if m == metric for v in by_head.values()
    ]
    if not means:
        raise FileNotFoundError(f"no shifted-domain results stored; run {SHIFTED_COMMAND}")
    return f"{max(means):.2f}"


BLOCKS: dict[str, Callable[[StoredResults], str]] = {
    "clip-losses": _table(SWEEPS["clip"]),
    "clip-emoji": _table(SWEEPS["emoji"]),
    "clip-emoji-shifted": shifted_table,
}
VALUES: dict[str, Callable[[StoredResults, str], str]] = {
    f"{prefix}-{name}": value for prefix, sweep_name in SWEEPS.items() for name, value in _values(sweep_name).items()
} | {"emoji-shifted-best": shifted_best}
