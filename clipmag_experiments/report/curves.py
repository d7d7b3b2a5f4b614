"""Learning curves: nDCG@10 and Cohen's d of document norms against the training pairs seen.

A budget sweep runs each start and head at several budgets (groups of one task that differ in
their step count, e.g. checkpoints of one long run, ``continue_from``); the groups its protocol
compares (``comparison.groups`` in ``sweep.json``) are the points. Per start and test set, one
figure: nDCG@10 against pairs seen (log scale), a line per head through its seed mean with the band
between its lowest and highest seed, and beside it Cohen's d of document norms (relevant vs not,
seed mean and band) against the same axis - whether the gap to cosine closes, holds or reverses with
budget, and whether the norms start to carry relevance on the way. Selection groups (a dev split)
are never points, as they are not compared.

A line joins only runs that differ in their length: a compared group trained otherwise at the same
budget (the fair fight's learned temperature beside its fixed one) is a line of its own, named by
its groups, so two arms' seeds are never averaged into one point.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from clipmag_experiments.report.collect import CellResult
from clipmag_experiments.report.comparison import protocol_comparison
from clipmag_experiments.report.plots import OUTSIDE, plt, save_figure

__all__ = ["CurvePoint", "curve_points", "learning_curves"]

METRIC = "NDCG@10"
# the settings that make a run longer or shorter, or name where and when it reports: what a budget's
# runs may differ in and still be one line
RUN_LENGTH = frozenset(
    {
        "train.steps",
        "train.seed",
        "train.output_dir",
        "train.resume",
        "train.overwrite",
        "train.eval_every",
        "train.save_every",
        "train.log_every",
        "optim.warmup_steps",
    }
)


@dataclass(frozen=True)
class CurvePoint:
    """One head of one start on one test set at one budget, over its seeds."""

    start: str
    dataset: str
    head: str
    line: str  # the head, with the groups of its line where the head has more than one
    pairs: int
    ndcg: tuple[float, float, float]  # seed mean, lowest, highest
    cohens_d: tuple[float, float, float] | None


def pairs_seen(cell: CellResult) -> int:
    """Training pairs the tested model saw: the last ``samples_seen`` the run logged (a continued run
    counts from the start of the run it continued), else steps x rows per step from its config."""
    path = cell.directory / "metrics.jsonl"
    if path.is_file():
        logged = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        seen = [r["samples_seen"] for r in logged if r.get("kind") == "train" and "samples_seen" in r]
        if seen:
            return int(seen[-1])
    run = cell.results.get("run") or {}
    config = (cell.results.get("provenance") or {}).get("config") or {}
    rows = (config.get("data") or {}).get("batch_size", 0) * (config.get("train") or {}).get("grad_accum", 1)
    return int(run.get("steps", 0)) * int(rows) * int(run.get("world_size", 1))


def _spread(values: list[float]) -> tuple[float, float, float]:
    return float(np.mean(values)), float(min(values)), float(max(values))


def _flat(config: dict, prefix: str = "") -> dict[str, object]:
    flat: dict[str, object] = {}
    for key, value in config.items():
        if isinstance(value, dict):
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _training(cell: CellResult) -> str:
    """How the cell trained, its length aside: cells of one line share it."""
    config = _flat((cell.results.get("provenance") or {}).get("config") or {})
    return json.dumps({k: v for k, v in config.items() if k not in RUN_LENGTH}, sort_keys=True, default=str)


def _line_names(lines: dict[tuple[str, str, str, str], list[str]]) -> dict[tuple[str, str, str, str], str]:
    """Each line's legend name: the head alone for its first line, the head and its groups for another."""
    names, seen = {}, set()
    for (start, dataset, head, training), groups in lines.items():
        first = (start, dataset, head) not in seen
        seen.add((start, dataset, head))
        names[(start, dataset, head, training)] = head if first else f"{head} ({', '.join(groups)})"
    return names


def curve_points(runs_dir: Path, cells: list[CellResult]) -> list[CurvePoint]:
    """The points of the protocol's compared groups, by start, test set, head, line and pairs seen."""
    statement = protocol_comparison(runs_dir) or {}
    groups = list(dict.fromkeys(statement.get("groups") or {}))
    compared = sorted(
        (c for c in cells if c.cell["group"] in groups and c.cell.get("model")),
        key=lambda c: groups.index(c.cell["group"]),
    )
    found: dict[tuple[str, str, str, str, int], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    lines: dict[tuple[str, str, str, str], list[str]] = defaultdict(list)
    for c in compared:
        pairs, training = pairs_seen(c), _training(c)
        for dataset, result in c.results["metrics"].items():
            if isinstance(result.get(METRIC), (int, float)):
                line = (c.cell["model"], dataset, c.head, training)
                if c.cell["group"] not in lines[line]:
                    lines[line].append(c.cell["group"])
                values = found[(*line, pairs)]
                values["ndcg"].append(float(result[METRIC]))
                d = ((result.get("diagnostics") or {}).get("document_norm_effect") or {}).get("cohens_d")
                if isinstance(d, (int, float)):
                    values["d"].append(float(d))
    names = _line_names(lines)
    points = [
        CurvePoint(
            start,
            dataset,
            head,
            names[(start, dataset, head, training)],
            pairs,
            _spread(v["ndcg"]),
            _spread(v["d"]) if v["d"] else None,
        )
        for (start, dataset, head, training, pairs), v in found.items()
    ]
    return sorted(points, key=lambda p: (p.start, p.dataset, p.head, p.line, p.pairs))


def _panel(ax, points: list[CurvePoint], value: str, label: str) -> None:
    """A line per head (another arm of a head: its colour, dashed, diamonds; a lone point: its range
    as an error bar), on a log axis ticked at the budgets themselves."""
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    heads = list(dict.fromkeys(p.head for p in points))
    for name in dict.fromkeys(p.line for p in points):
        own = sorted((p for p in points if p.line == name and getattr(p, value) is not None), key=lambda p: p.pairs)
        if not own:
            continue
        x = [p.pairs for p in own]
        mean, low, high = (np.array(v) for v in zip(*(getattr(p, value) for p in own)))
        colour, arm = colours[heads.index(own[0].head) % len(colours)], name != own[0].head
        style = {"color": colour, "marker": "D" if arm else "o", "linestyle": "--" if arm else "-", "label": name}
        if len(own) == 1:
            ax.errorbar(x, mean, yerr=[mean - low, high - mean], capsize=3, **style)
        else:
            ax.plot(x, mean, **style)
            ax.fill_between(x, low, high, alpha=0.2, color=colour)
    ax.set_xscale("log")
    budgets = sorted({p.pairs for p in points})
    ax.set_xticks(budgets, [f"{b:,}" for b in budgets])
    ax.minorticks_off()
    ax.set_xlabel("training pairs seen")
    ax.set_ylabel(label)


def learning_curves(runs_dir: Path, cells: list[CellResult]) -> list[Path]:
    """A figure per start and test set with two or more budgets (``fig_curve_<start>_<dataset>.png``)."""
    points = curve_points(runs_dir, cells)
    paths = []
    for start, dataset in dict.fromkeys((p.start, p.dataset) for p in points):
        own = [p for p in points if (p.start, p.dataset) == (start, dataset)]
        if len({p.pairs for p in own}) < 2:
            continue
        fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.4))
        _panel(left, own, "ndcg", "nDCG@10 (test), seed mean and range")
        _panel(right, own, "cohens_d", "Cohen's d of document norms")
        right.axhline(0.0, color="grey", lw=0.5)
        fig.suptitle(f"{start} on {dataset}", fontsize=10)
        right.legend(**OUTSIDE)
        paths.append(save_figure(fig, runs_dir / f"fig_curve_{start}_{dataset}.png"))
    return paths
