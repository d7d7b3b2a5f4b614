"""The floors under a CLIP table: what its test and shifted images give without learning
(:mod:`clipmag_experiments.sweep.floors`), x100 like the table, so a zero-shot or recall figure is
read against chance, the majority class, a pixel nearest neighbour and a random ranking."""

from __future__ import annotations

from typing import Any

__all__ = ["floors_table"]

FLOOR_NAMES = {
    "chance": "chance",
    "majority_class": "majority class",
    "pixel_nearest_neighbour": "pixel nearest neighbour",
}
RETRIEVAL_COLUMNS = ("i2t_r1", "t2i_r1", "i2t_r5", "t2i_r5", "i2t_r10", "t2i_r10")


def floors_table(floors: dict[str, Any], splits: tuple[str, ...] = ()) -> str:
    """A markdown table of the zero-shot floors (top-1, mean per-class recall) and the random-ranking
    recall of each evaluated split (``splits``: those, in that order; default all but validation)."""
    names = list(splits) or [name for name in floors if name != "val"]
    lines = [
        "| floor | split | images | zero-shot top-1 | mean per-class recall |",
        "|---|---|---|---|---|",
    ]
    for split in names:
        record = floors[split]
        for key, label in FLOOR_NAMES.items():
            scores = record["zero_shot"][key]
            lines.append(
                f"| {label} | {split} | {record['images']} | {100 * scores['acc1']:.2f} | "
                f"{100 * scores['mean_per_class_recall']:.2f} |"
            )
    lines += ["", "| random ranking | split | " + " | ".join(RETRIEVAL_COLUMNS) + " |"]
    lines.append("|---|---|" + "---|" * len(RETRIEVAL_COLUMNS))
    for split in names:
        recall = floors[split]["retrieval_random_ranking"]
        lines.append(
            f"| random ranking | {split} | " + " | ".join(f"{100 * recall[c]:.2f}" for c in RETRIEVAL_COLUMNS) + " |"
        )
    return "\n".join(lines)
