"""The README's findings table lists a committed protocol as not run yet until its results folder
holds a finished cell of its compared group, not merely its protocol or its earlier groups."""

from __future__ import annotations

import json

from clipmag_experiments.manuals.findings import Pending
from clipmag_experiments.report.stored import StoredResults


def _protocol(folder, groups):
    folder.mkdir(parents=True, exist_ok=True)
    starts = [{"config": {"groups": [{"name": g} for g in groups]}}]
    (folder / "sweep.json").write_text(json.dumps({"starts": starts}))


def test_a_sweep_stored_over_sittings_stays_pending_until_its_compared_group_has_a_result(tmp_path):
    pending = Pending("question?", "configs/sweeps/x.yaml", "docs/x.md", "x", "fight")
    stored = StoredResults(tmp_path)
    assert not pending.answered(stored)  # no folder
    _protocol(tmp_path / "x", ["start", "tune", "fight"])
    start = tmp_path / "x" / "start" / "splade" / "cosine" / "seed0"
    start.mkdir(parents=True)
    (start / "results.json").write_text("{}")
    assert not pending.answered(stored)  # the protocol and a step-0 cell, no compared result
    fight = tmp_path / "x" / "fight" / "splade" / "cosine" / "seed2"
    fight.mkdir(parents=True)
    (fight / "results.json").write_text("{}")
    assert pending.answered(stored)


def test_each_pending_question_waits_for_a_compared_group_of_its_protocol():
    """A sweep's earlier groups (its tower or rate choice) are stored before its compared ones: the
    README row must wait for a group the protocol compares, or it would vanish half-run."""
    from clipmag.registry.config_packages import config_path
    from clipmag_experiments.manuals.findings import PENDING
    from clipmag_experiments.sweep import run as sweep

    for pending in PENDING:
        cfg = sweep.load_sweep_config(config_path(pending.protocol))
        assert pending.group in cfg.comparison.groups, pending.protocol
