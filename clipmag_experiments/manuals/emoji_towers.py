"""The rebuilt emoji protocol's first step in the manuals: the towers chosen on validation, against
the floors the images give without learning (``results/clip_emoji``, ``configs/sweeps/clip_emoji.yaml``).

The protocol chooses the tower and its steps on validation zero-shot mean per-class recall with the
head, and gates the compared groups on it: the chosen tower's cosine must clear the validation pixel
nearest neighbour's mean per-class recall and top-1. Until a tower clears it the compared groups do
not run, so this block is what the stored sweep answers so far, and the README's row says the same.

- ``emoji-towers``: each tower cell's validation zero-shot (top-1 and mean per-class recall), its
  image features' own nearest neighbour with the training labels (the evaluation
  ``feature-neighbour``, a diagnostic beside the gate, not part of it), its mean R@1 and training
  time, the floors beneath, and the gate's verdict on the chosen tower;
- :func:`status` (the value ``emoji-status``): the README row's words while the compared groups wait.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from clipmag.registry.evaluations import get_evaluation
from clipmag.results.record import RESULTS_FILE
from clipmag_experiments.design.grid import EVALUATIONS_DIR
from clipmag_experiments.design.protocol import read_protocol
from clipmag_experiments.report.collect import CellResult
from clipmag_experiments.report.stored import StoredResults
from clipmag_experiments.sweep.floors import read_floors

__all__ = ["BLOCKS", "SWEEP", "VALUES", "cleared", "status", "towers_table"]

SWEEP = "clip_emoji"  # the rebuilt protocol's archive
GROUP = "towers"
RECALL, TOP1 = "zeroshot_mean_per_class_recall_head", "zeroshot_acc1_head"
FLOOR = "pixel_nearest_neighbour"  # the floor the gate names
NEIGHBOUR, NEIGHBOUR_SET = "feature-neighbour", "val"  # the evaluation kind, and the set it scores
FLOOR_ROWS = {"chance": "chance (1/58)", "majority_class": "majority class", FLOOR: "pixel 1-nearest neighbour"}


def _towers(stored: StoredResults) -> list[CellResult]:
    """The stored tower cells in the order the protocol lists its variants (none before the sweep
    ran), so a tie in the choice goes to the first listed, as the sweep's own choices do."""
    if not (stored.root / SWEEP / GROUP).is_dir():
        return []
    groups = read_protocol(stored.root / SWEEP)[-1]["config"]["groups"]  # as last amended
    listed = [v["name"] for g in groups if g["name"] == GROUP for v in g["variants"]]
    return sorted(stored.sweep(SWEEP).group(GROUP), key=lambda cell: listed.index(cell.cell["variant"]))


def _validation_floors(stored: StoredResults) -> dict[str, Any]:
    floors = read_floors(stored.root / SWEEP)
    if floors is None:
        raise FileNotFoundError(f"{stored.root / SWEEP}: no baselines.json; the sweep's prepare step floors writes it")
    return floors["val"]["zero_shot"]


def cleared(cell: CellResult, floors: dict[str, Any]) -> bool:
    """Whether a tower's validation zero-shot clears the gate: above the pixel nearest neighbour's
    mean per-class recall and its top-1 alike."""
    validation = cell.results["validation"]
    return validation[RECALL] > floors[FLOOR]["mean_per_class_recall"] and validation[TOP1] > floors[FLOOR]["acc1"]


def _neighbour(cell: CellResult) -> dict[str, float] | None:
    """The tower's image-feature nearest neighbour on validation (its attached ``feature-neighbour``
    evaluation): None where it has not run."""
    for attached in cell.cell.get("evaluations", []):
        folder = cell.directory / EVALUATIONS_DIR / attached["name"]
        if attached["kind"] == NEIGHBOUR and (folder / RESULTS_FILE).is_file():
            return get_evaluation(NEIGHBOUR).read(folder).metrics[NEIGHBOUR_SET]
    return None


def _pair(scores: dict[str, float] | None) -> str:
    """Mean per-class recall / top-1 x100 (a dash before the evaluation ran)."""
    return "-" if scores is None else f"{100 * scores['mean_per_class_recall']:.2f} / {100 * scores['acc1']:.2f}"


def _chosen(cells: list[CellResult]) -> CellResult:
    """The protocol's choice: the highest validation zero-shot mean per-class recall (a tie: the
    first listed). The gate is read on this tower alone."""
    return max(cells, key=lambda c: c.results["validation"][RECALL])


def towers_table(stored: StoredResults) -> str:
    """Each tower's validation scores x100 above the floors, and whether the chosen one clears the gate."""
    cells = _towers(stored)
    if not cells:
        return "_No run of the rebuilt protocol is stored yet._"
    floors = _validation_floors(stored)
    lines = [
        "| tower (steps) | zero-shot mean per-class recall | zero-shot top-1 "
        "| image features' 1-NN, with labels: recall / top-1 | mean R@1 | training s |",
        "|---|---|---|---|---|---|",
    ]
    neighbours = {cell.config: _neighbour(cell) for cell in cells}  # each evaluation read once
    for cell in cells:
        v = cell.results["validation"]
        seconds = cell.results.get("timings", {}).get("train_seconds", 0.0)
        lines.append(
            f"| {cell.config} | {100 * v[RECALL]:.2f} | {100 * v[TOP1]:.2f} | {_pair(neighbours[cell.config])} | "
            f"{100 * v['mean_r1_head']:.2f} | {seconds:,.0f} |"
        )
    for key, label in FLOOR_ROWS.items():
        floor = floors[key]
        lines.append(f"| _{label}_ | {100 * floor['mean_per_class_recall']:.2f} | {100 * floor['acc1']:.2f} | | | |")
    tower = _chosen(cells)
    named = f"Gate: {tower.config}, the tower chosen (the highest validation zero-shot mean per-class recall),"
    verdict = (
        f"{named} clears the pixel nearest neighbour; the compared groups run at it"
        if cleared(tower, floors)
        else f"{named} does not clear the pixel nearest neighbour, so the compared groups do not run until an "
        "amendment widens the tower grid"
    )
    reading = _reading(tower, neighbours[tower.config], floors)
    return "\n".join(lines) + f"\n\n{verdict} (validation, {tower.cell.get('head')}, seed 0).{reading}"


def _reading(tower: CellResult, neighbour: dict[str, float] | None, floors: dict[str, Any]) -> str:
    """What the chosen tower's own nearest neighbour says beside its zero-shot (empty before it ran)."""
    if neighbour is None:
        return ""
    pixel, zero_shot = floors[FLOOR], tower.results["validation"][RECALL]
    gap = 100 * (neighbour["mean_per_class_recall"] - zero_shot)
    return (
        f" With the training labels, {tower.config}'s own image features reach {_pair(neighbour)} (mean per-class "
        f"recall / top-1) by nearest neighbour, against the pixel nearest neighbour's {_pair(pixel)}; its zero-shot "
        f"recall is {abs(gap):.2f} points {'below' if gap >= 0 else 'above'} what its image features separate."
    )


def status(stored: StoredResults) -> str | None:
    """The README row's words while the compared groups wait: None before any tower is stored."""
    cells = _towers(stored)
    if not cells:
        return None
    floors = _validation_floors(stored)
    tower = _chosen(cells)
    recall = f"{100 * tower.results['validation'][RECALL]:.1f} validation zero-shot mean per-class recall"
    if cleared(tower, floors):
        return f"towers chosen ({tower.config}: {recall}); the compared runs come next"
    floor = floors[FLOOR]
    return (
        f"towers only: the chosen tower ({tower.config}, {recall}) does not clear the pixel floor "
        f"({100 * floor['mean_per_class_recall']:.1f} recall, {100 * floor['acc1']:.1f} top-1), so the compared "
        "runs wait for a wider tower grid"
    )


def status_value(stored: StoredResults, argument: str = "") -> str:
    """:func:`status` as a value of the manuals ("not run yet" before any tower)."""
    return status(stored) or "not run yet"


BLOCKS: dict[str, Callable[[StoredResults], str]] = {"emoji-towers": towers_table}
VALUES: dict[str, Callable[[StoredResults, str], str]] = {"emoji-status": status_value}
