"""Learning curves: nDCG@10 and Cohen's d of document norms against the training pairs seen.

A budget sweep runs each start and head at several budgets (groups of one task that differ in
their step count, e.g. checkpoints of one long run, ``continue_from``); the groups its protocol
compares (``comparison.groups`` in ``sweep.json``) are the points. Per start and test set, one
figure: nDCG@10 against pairs seen (log scale), a line per head through its seed mean with the band
between its lowest and highest seed, and beside it Cohen's d of document norms (relevant vs not,
seed mean and band) against the same axis - whether the gap to cosine closes, holds or reverses with
budget, and whether the norms start to carry relevance on the way. Selection groups (a dev split)
are never points, as they are not compared.
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


@dataclass(frozen=True)
class CurvePoint:
    """One head of one start on one test set at one budget, over its seeds."""

    start: str
    dataset: str
    head: str
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


def curve_points(runs_dir: Path, cells: list[CellResult]) -> list[CurvePoint]:
    """The points of the protocol's compared groups, by start, test set, head and pairs seen."""
    statement = protocol_comparison(runs_dir) or {}
    groups = set(statement.get("groups") or {})
    found: dict[tuple[str, str, str, int], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for c in cells:
        if c.cell["group"] not in groups or not c.cell.get("model"):
            continue
        pairs = pairs_seen(c)
        for dataset, result in c.results["metrics"].items():
            if isinstance(result.get(METRIC), (int, float)):
                values = found[(c.cell["model"], dataset, c.head, pairs)]
                values["ndcg"].append(float(result[METRIC]))
                d = ((result.get("diagnostics") or {}).get("document_norm_effect") or {}).get("cohens_d")
                if isinstance(d, (int, float)):
                    values["d"].append(float(d))
    return [
        CurvePoint(start, dataset, head, pairs, _spread(v["ndcg"]), _spread(v["d"]) if v["d"] else None)
        for (start, dataset, head, pairs), v in sorted(found.items())
    ]


def _panel(ax, points: list[CurvePoint], value: str, label: str) -> None:
    for head in dict.fromkeys(p.head for p in points):
        own = sorted((p for p in points if p.head == head and getattr(p, value) is not None), key=lambda p: p.pairs)
        if not own:
            continue
        x = [p.pairs for p in own]
        mean, low, high = zip(*(getattr(p, value) for p in own))
        (line,) = ax.plot(x, mean, marker="o", label=head)
        ax.fill_between(x, low, high, alpha=0.2, color=line.get_color())
    ax.set_xscale("log")
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
