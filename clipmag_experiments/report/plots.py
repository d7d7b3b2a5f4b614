"""The report's figures (matplotlib, PNG, no display needed)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from clipmag_experiments.report.tables import TableRow  # noqa: E402

# Legends sit to the right of the axes, never over the data; the saved box grows to hold them.
OUTSIDE = {"fontsize": 7, "loc": "upper left", "bbox_to_anchor": (1.01, 1.0), "borderaxespad": 0.0}


def save_figure(fig: plt.Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def norm_histograms(samples: dict[tuple[str, str], dict[str, list[float]]], path: Path) -> Path | None:
    """Document norms of relevant vs non-relevant documents, one panel per (head, dataset)."""
    if not samples:
        return None
    keys = sorted(samples)
    cols = min(5, len(keys))
    rows = (len(keys) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.6 * rows), squeeze=False)
    for ax, key in zip(axes.flat, keys):
        rel, non = np.asarray(samples[key]["relevant"]), np.asarray(samples[key]["nonrelevant"])
        bins = np.histogram_bin_edges(np.concatenate([rel, non]), bins=30)
        ax.hist(non, bins=bins, alpha=0.6, density=True, label="non-relevant")
        ax.hist(rel, bins=bins, alpha=0.6, density=True, label="relevant")
        ax.set_title(f"{key[0]} / {key[1]}", fontsize=9)
        ax.set_xlabel("|d|", fontsize=8)
    for ax in list(axes.flat)[len(keys) :]:
        ax.axis("off")
    axes.flat[cols - 1].legend(*axes.flat[0].get_legend_handles_labels(), **OUTSIDE)
    return save_figure(fig, path)


def gamma_trajectories(trajectories: dict[str, list[tuple[int, float, float]]], path: Path) -> Path | None:
    """gq and gd of the learnable head over training steps."""
    if not any(trajectories.values()):
        return None
    fig, ax = plt.subplots(figsize=(5, 3.2))
    for name, points in trajectories.items():
        if points:
            steps, gq, gd = zip(*points)
            ax.plot(steps, gq, label=f"gq {name}")
            ax.plot(steps, gd, "--", label=f"gd {name}")
    ax.axhline(0.5, color="grey", lw=0.5)
    ax.set_xlabel("step")
    ax.set_ylabel("gamma")
    ax.legend(**OUTSIDE)
    return save_figure(fig, path)


def metric_bars(table: list[TableRow], metric: str, path: Path, title: str) -> Path | None:
    """Grouped bars: one group per (group, dataset), one bar per head / variant, error bars = std."""
    rows = [r for r in table if r.metric == metric]
    if not rows:
        return None
    configs = list(dict.fromkeys(c for r in rows for c in r.cells))
    width = 0.8 / len(configs)
    x = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(max(4.5, 1.4 * len(rows) + 1), 3.4))
    for i, name in enumerate(configs):
        means = [r.cells[name].mean if name in r.cells else np.nan for r in rows]
        stds = [r.cells[name].std if name in r.cells else 0.0 for r in rows]
        ax.bar(x + i * width - 0.4 + width / 2, means, width, yerr=stds, label=name)
    labels = [f"{r.group}\n{r.dataset}" if r.model == "default" else f"{r.group}\n{r.model}\n{r.dataset}" for r in rows]
    ax.set_xticks(x, labels, fontsize=8)
    ax.set_ylabel(metric)
    ax.set_title(title, fontsize=10)
    ax.legend(**OUTSIDE)
    return save_figure(fig, path)


def clip_recall(table: list[TableRow], path: Path) -> Path | None:
    """CLIP R@1 in both directions (cosine-scored and head-scored) per configuration."""
    wanted = ["i2t_r1_cosine", "t2i_r1_cosine", "i2t_r1_head", "t2i_r1_head"]
    rows = {r.metric: r for r in table if r.metric in wanted}
    if not rows:
        return None
    configs = list(dict.fromkeys(c for r in rows.values() for c in r.cells))
    x = np.arange(len(configs))
    width = 0.8 / len(rows)
    fig, ax = plt.subplots(figsize=(max(5, 1.6 * len(configs)), 3.4))
    for i, metric in enumerate(m for m in wanted if m in rows):
        means = [rows[metric].cells[c].mean if c in rows[metric].cells else np.nan for c in configs]
        ax.bar(x + i * width - 0.4 + width / 2, means, width, label=metric.replace("_r1_", " R@1 "))
    ax.set_xticks(x, configs, fontsize=8)
    ax.set_ylabel("R@1")
    ax.legend(**OUTSIDE)
    return save_figure(fig, path)
