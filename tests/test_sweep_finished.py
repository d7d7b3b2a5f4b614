"""A sweep re-checks what it skips: a truncated, foreign or dangling results.json is not "finished"."""

from __future__ import annotations

import json
import logging

import pytest
import toy_frontend

from clipmag.registry.front_ends import FRONT_ENDS, FrontEnd
from clipmag_experiments.sweep import run as sweep


@pytest.fixture
def toy_sweep(monkeypatch, tmp_path):
    monkeypatch.setitem(FRONT_ENDS, "toy", FrontEnd("toy", "toy_frontend"))
    toy_frontend.CALLS.clear()
    group = sweep.SweepGroup(name="toy", kind="toy", heads=["cosine", "qnorm"], seeds=[0])
    cfg = sweep.SweepConfig(output_dir=str(tmp_path / "runs"), groups=[group])
    sweep.run_sweep(cfg)
    toy_frontend.CALLS.clear()
    return cfg, tmp_path / "runs" / "toy" / "default"


def _rerun_heads(cfg) -> list[str]:
    toy_frontend.CALLS.clear()
    sweep.run_sweep(cfg)
    return [c[c.index("--norm") + 1] for c in toy_frontend.CALLS]


def test_a_truncated_results_file_is_run_again_saying_why(toy_sweep, caplog):
    cfg, cells = toy_sweep
    path = cells / "qnorm" / "seed0" / "results.json"
    path.write_text(path.read_text()[:40])
    with caplog.at_level(logging.WARNING, logger="clipmag"):
        assert _rerun_heads(cfg) == ["qnorm"]
    assert "toy/qnorm/seed0: not finished (its results.json is unreadable" in caplog.text
    assert json.loads(path.read_text())["head"]["head"]["name"] == "qnorm"  # written whole again


def test_another_heads_or_seeds_results_are_not_taken_for_the_cell(toy_sweep):
    cfg, cells = toy_sweep
    (cells / "qnorm" / "seed0" / "results.json").write_bytes((cells / "cosine" / "seed0" / "results.json").read_bytes())
    assert _rerun_heads(cfg) == ["qnorm"]
    record = json.loads((cells / "cosine" / "seed0" / "results.json").read_text())
    record["run"]["seed"] = 7
    (cells / "cosine" / "seed0" / "results.json").write_text(json.dumps(record))
    assert _rerun_heads(cfg) == ["cosine"]


def test_results_naming_a_missing_model_are_not_finished(toy_sweep, caplog):
    cfg, cells = toy_sweep
    path = cells / "cosine" / "seed0" / "results.json"
    record = json.loads(path.read_text())
    record["checkpoint"]["path"] = str(cells / "cosine" / "seed0" / "export")  # never written by the toy
    path.write_text(json.dumps(record))
    with caplog.at_level(logging.WARNING, logger="clipmag"):
        assert _rerun_heads(cfg) == ["cosine"]
    assert "which is not there" in caplog.text
    assert _rerun_heads(cfg) == []  # finished now


def test_a_sweep_goes_on_from_an_earlier_sittings_archive(toy_sweep, tmp_path, caplog):
    """A new machine keeps only the archive: its finished cells are restored, not trained again,
    though the checkpoints their results name stayed behind; the protocol record keeps its first
    start, and a cell missing from the archive trains."""
    import dataclasses
    import shutil

    from clipmag_experiments.design.protocol import read_protocol
    from clipmag_experiments.sweep.archive import archive_results

    cfg, cells = toy_sweep
    for head in ("cosine", "qnorm"):
        path = cells / head / "seed0" / "results.json"
        record = json.loads(path.read_text())
        record["checkpoint"]["path"] = str(cells / head / "seed0" / "checkpoints" / "best.pt")  # left behind
        path.write_text(json.dumps(record))
    archive = tmp_path / "archive"
    archive_results(cfg.output_dir, archive)
    shutil.rmtree(archive / "toy" / "default" / "qnorm")
    first_start = read_protocol(cfg.output_dir)[0]
    shutil.rmtree(cfg.output_dir)  # the next sitting's machine
    moved = dataclasses.replace(cfg, restore_from=str(archive))
    toy_frontend.CALLS.clear()
    with caplog.at_level(logging.INFO, logger="clipmag"):
        sweep.run_sweep(moved)
    assert [c[c.index("--norm") + 1] for c in toy_frontend.CALLS] == ["qnorm"]
    assert "1 finished cells restored from" in caplog.text
    assert json.loads((cells / "cosine" / "seed0" / "restored.json").read_text())["from"].endswith("cosine/seed0")
    starts = read_protocol(cfg.output_dir)
    assert len(starts) == 2 and starts[0] == first_start
    (tmp_path / "a-file").write_text("")
    with pytest.raises(ValueError, match="restore_from .* is not a folder"):
        sweep.run_sweep(dataclasses.replace(cfg, restore_from=str(tmp_path / "a-file")))
    caplog.clear()
    sweep.run_sweep(dataclasses.replace(cfg, restore_from=str(tmp_path / "nowhere")))  # the first sitting
    assert "no archive there yet" in caplog.text


def test_an_archived_cell_that_ran_with_other_arguments_is_not_restored(toy_sweep, tmp_path, caplog):
    """The archive is another sitting's, or another sweep's with cells at the same places: a cell is
    restored only if it ran with this cell's arguments (an amended protocol's cell runs again)."""
    import dataclasses
    import shutil

    from clipmag_experiments.sweep.archive import archive_results

    cfg, _ = toy_sweep
    archive = tmp_path / "archive"
    archive_results(cfg.output_dir, archive)
    shutil.rmtree(cfg.output_dir)
    group = dataclasses.replace(cfg.groups[0], args=["loss.scale=5.0"])
    amended = dataclasses.replace(cfg, groups=[group], restore_from=str(archive))
    toy_frontend.CALLS.clear()
    with caplog.at_level(logging.WARNING, logger="clipmag"):
        sweep.run_sweep(amended)
    assert sorted(c[c.index("--norm") + 1] for c in toy_frontend.CALLS) == ["cosine", "qnorm"]
    assert "toy/cosine/seed0 ran otherwise (there nothing more, here loss.scale=5.0)" in caplog.text


def test_a_cell_sharing_a_restored_cells_run_is_finished_without_its_checkpoint(toy_sweep):
    """A compared cell that took a tuning cell's results names that cell's checkpoint; where the tuning
    cell was restored from an archive (its checkpoint stayed on the machine that trained it), the
    sharer is finished too, and is not reported as running again. Where the twin was not restored,
    a missing checkpoint still means not finished."""
    import dataclasses

    from clipmag_experiments.cells.finished import unfinished_reason
    from clipmag_experiments.cells.restored import RESTORED_FILE
    from clipmag_experiments.cells.same_run import share_results
    from clipmag_experiments.design.expansion import expand

    cfg, cells = toy_sweep
    twin = next(c for c in expand(cfg) if c.head == "cosine")
    path = twin.directory / "results.json"
    record = json.loads(path.read_text())
    record["checkpoint"]["path"] = str(twin.directory / "export")  # stayed on another machine
    path.write_text(json.dumps(record))
    (twin.directory / RESTORED_FILE).write_text(json.dumps({"from": "archive/toy/default/cosine/seed0"}))
    shared_dir = cells.parent.parent / "final" / "default" / "cosine" / "seed0"
    sharer = dataclasses.replace(twin, group="final", directory=shared_dir)
    share_results(sharer, twin)
    assert unfinished_reason(twin) is None and unfinished_reason(sharer) is None
    (twin.directory / RESTORED_FILE).unlink()
    assert "which is not there" in unfinished_reason(sharer)
