"""The rebuilt emoji protocol's towers in the manuals: each tower's validation zero-shot above the
floors, the gate read from the pixel nearest neighbour (mean per-class recall and top-1 alike), and
the README row's words while the compared groups wait."""

from __future__ import annotations

import json
from pathlib import Path

from clipmag.results.record import build_results, write_results
from clipmag.scoring.head_record import HeadRecord
from clipmag_experiments.manuals import emoji_towers, findings
from clipmag_experiments.report.stored import StoredResults

FLOORS = {
    "chance": {"acc1": 1 / 58, "mean_per_class_recall": 1 / 58},
    "majority_class": {"acc1": 0.13, "mean_per_class_recall": 0.02},
    "pixel_nearest_neighbour": {"acc1": 0.46, "mean_per_class_recall": 0.35},
}


FIRST = ("t500", "t1000", "s500", "s1000")  # the protocol's order


def _store(root: Path, towers: dict[str, tuple[float, float]], *amended: tuple[str, ...]) -> StoredResults:
    """A results root holding the emoji sweep's floors and one tower cell per (recall, top-1); each
    of ``amended`` is a later start's tower grid."""
    sweep = root / emoji_towers.SWEEP
    sweep.mkdir(parents=True)
    (sweep / "baselines.json").write_text(json.dumps({"val": {"zero_shot": FLOORS}}))
    starts = [
        {"config": {"groups": [{"name": emoji_towers.GROUP, "variants": [{"name": n} for n in grid]}]}}
        for grid in (FIRST, *amended)
    ]
    (sweep / "sweep.json").write_text(json.dumps({"starts": starts}))
    for variant, (recall, top1) in towers.items():
        folder = sweep / emoji_towers.GROUP / "default" / f"cosine-{variant}" / "seed0"
        folder.mkdir(parents=True)
        cell = {"group": emoji_towers.GROUP, "kind": "clip", "head": "cosine", "variant": variant, "seed": 0}
        (folder / "cell.json").write_text(json.dumps(cell))
        validation = {emoji_towers.RECALL: recall, emoji_towers.TOP1: top1, "mean_r1_head": 0.1}
        record = build_results({"seed": 0}, HeadRecord({"name": "cosine"}), {}, {}, validation, {"train_seconds": 90.0})
        write_results(record, folder)
    return StoredResults(root)


def test_no_tower_above_the_pixel_floor_keeps_the_compared_groups_waiting(tmp_path):
    stored = _store(tmp_path, {"t1000": (0.10, 0.09), "s500": (0.40, 0.20), "t500": (0.09, 0.08)})
    table = emoji_towers.towers_table(stored)
    assert [line.split(" | ")[0] for line in table.splitlines()[2:5]] == ["| t500", "| t1000", "| s500"]
    assert "| _pixel 1-nearest neighbour_ | 35.00 | 46.00 |" in table
    # s500 is chosen (the highest recall); its recall is above the floor, its top-1 is not
    assert "Gate: s500, the tower chosen (the highest validation zero-shot mean per-class recall), does not" in table
    assert emoji_towers.status(stored).startswith("towers only: the chosen tower (s500, 40.0 validation")
    pending = next(p for p in findings.PENDING if p.folder == emoji_towers.SWEEP)
    assert pending.status is emoji_towers.status and not pending.answered(stored)  # the README row waits


def test_a_chosen_tower_that_clears_both_floors_opens_the_gate(tmp_path):
    stored = _store(tmp_path, {"s1000": (0.41, 0.52), "t500": (0.09, 0.08)})
    assert "Gate: s1000, the tower chosen" in emoji_towers.towers_table(stored)
    assert "clears the pixel nearest neighbour; the compared groups run at it" in emoji_towers.towers_table(stored)
    assert emoji_towers.status(stored).startswith("towers chosen (s1000: 41.0")


def test_the_gate_is_read_on_the_chosen_tower_alone(tmp_path):
    """The protocol gates the tower it chooses (by recall): another tower that clears both floors
    with less recall does not open the gate."""
    stored = _store(tmp_path, {"s500": (0.45, 0.30), "t1000": (0.36, 0.50)})
    assert "Gate: s500, the tower chosen" in emoji_towers.towers_table(stored)
    assert emoji_towers.status(stored).startswith("towers only: the chosen tower (s500")


def test_before_any_tower_the_row_is_not_run_yet(tmp_path):
    stored = StoredResults(tmp_path)
    assert emoji_towers.status(stored) is None
    assert emoji_towers.towers_table(stored).startswith("_No run of the rebuilt protocol")


def test_an_amended_grid_lists_its_towers_in_the_last_start_order(tmp_path):
    """Towers an amendment adds sit where the amended protocol lists them, and one that clears
    opens the gate as any tower would."""
    stored = _store(tmp_path, {"sm500": (0.50, 0.60), "s500": (0.12, 0.06)}, (*FIRST, "sm500", "sm1000"))
    table = emoji_towers.towers_table(stored)
    assert [line.split(" | ")[0] for line in table.splitlines()[2:4]] == ["| s500", "| sm500"]
    assert "Gate: sm500, the tower chosen" in table


def test_a_towers_own_nearest_neighbour_sits_beside_its_zero_shot(tmp_path):
    """The feature-neighbour evaluation, where a tower cell holds it, fills its column and reads the
    chosen tower's gap; a tower without it shows a dash, and the gate does not move."""
    stored = _store(tmp_path, {"s500": (0.12, 0.06), "s1000": (0.16, 0.21)})
    folder = tmp_path / emoji_towers.SWEEP / emoji_towers.GROUP / "default" / "cosine-s1000" / "seed0"
    cell = json.loads((folder / "cell.json").read_text())
    cell["evaluations"] = [{"kind": "feature-neighbour", "name": "image-neighbour", "args": []}]
    (folder / "cell.json").write_text(json.dumps(cell))
    neighbour = folder / "evaluations" / "image-neighbour"
    neighbour.mkdir(parents=True)
    scored = {"acc1": 0.45, "mean_per_class_recall": 0.33, "predicted": [1, 2], "labels": [1, 3]}
    (neighbour / "results.json").write_text(json.dumps({"sets": {"val": scored}}))
    table = emoji_towers.towers_table(stored)
    assert "| s500 | 12.00 | 6.00 | - | 10.00 | 90 |" in table
    assert "| s1000 | 16.00 | 21.00 | 33.00 / 45.00 | 10.00 | 90 |" in table
    assert "Gate: s1000, the tower chosen" in table and "does not clear the pixel nearest neighbour" in table
    assert "s1000's own image features reach 33.00 / 45.00 (mean per-class recall / top-1) by nearest" in table
    assert "pixel nearest neighbour's 35.00 / 46.00; its zero-shot recall is 17.00 points below" in table
