"""A folder's lock refuses a second live process at once, naming it, and dies with its holder."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from clipmag.storage.folder_lock import LOCK_FILE, FolderBusy, FolderLock

HOLD = textwrap.dedent(
    """
    import sys, time
    from clipmag.storage.folder_lock import FolderLock
    lock = FolderLock(sys.argv[1], "training run").acquire()
    print("held", flush=True)
    time.sleep(120)
    """
)


def _holder(folder):
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_process_is_refused_naming_the_holder_and_a_killed_holder_frees_it(tmp_path):
    proc = _holder(tmp_path)
    try:
        with pytest.raises(FolderBusy, match=rf"is in use by another training run: pid {proc.pid} on .* since "):
            FolderLock(tmp_path, "training run").acquire()
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    with FolderLock(tmp_path, "sweep") as lock:  # nothing to clean up after a SIGKILL
        record = json.loads((tmp_path / LOCK_FILE).read_text())
        assert record["pid"] == os.getpid() and record["what"] == "sweep"
        assert lock.path == tmp_path / LOCK_FILE
    FolderLock(tmp_path, "again").acquire().release()  # released on exit from the block


def test_the_same_folder_twice_in_one_process_is_refused_too(tmp_path):
    with FolderLock(tmp_path, "sweep"):
        with pytest.raises(FolderBusy, match="in use by another sweep"):
            FolderLock(tmp_path, "training run").acquire()


def test_an_unwritable_folder_is_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(Exception, match="cannot write here") as err:
        FolderLock(blocker / "run", "training run").acquire()
    assert "\n" not in str(err.value)


def test_a_second_sweep_on_one_folder_is_refused_before_it_prepares_or_trains(tmp_path, monkeypatch):
    import toy_frontend

    from clipmag.registry.front_ends import FRONT_ENDS, FrontEnd
    from clipmag_experiments.sweep import run as sweep

    monkeypatch.setitem(FRONT_ENDS, "toy", FrontEnd("toy", "toy_frontend"))
    toy_frontend.CALLS.clear()
    group = sweep.SweepGroup(name="toy", kind="toy", heads=["cosine"], seeds=[0])
    cfg = sweep.SweepConfig(output_dir=str(tmp_path / "runs"), groups=[group])
    proc = _holder(tmp_path / "runs")
    try:
        with pytest.raises(FolderBusy, match=rf"runs is in use by another training run: pid {proc.pid}"):
            sweep.run_sweep(cfg)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert toy_frontend.CALLS == [] and not (tmp_path / "runs" / "toy").exists()
    sweep.run_sweep(cfg)  # the holder was killed: its lock went with it
    assert len(toy_frontend.CALLS) == 1


def test_evaluation_mining_and_rag_refuse_a_folder_in_use_before_touching_it(tmp_path):
    """eval_text and eval_rag lock their --output, the miner the staging folder it clears and
    publishes as --output; each is refused at once while another process holds it."""
    from text_retrieval.evaluation.cli import main as eval_main
    from text_retrieval.rag.cli import main as rag_main
    from text_retrieval.retrieval.mine_cli import main as mine_main

    (tmp_path / "data").mkdir()
    staging = tmp_path / ".mined.partial"
    staging.mkdir()
    (staging / "shard-000000.tar").write_bytes(b"the other miner's partial shard")
    commands = {
        tmp_path / "eval": lambda out: eval_main(["--model", "m", "--data", str(tmp_path / "data"), "--output", out]),
        tmp_path / "rag": lambda out: rag_main(["--data", "bundled", "--reader", "none", "--output", out]),
        staging: lambda _: mine_main(["--model", "m", "--data", "bundled", "--output", str(tmp_path / "mined")]),
    }
    for folder, command in commands.items():
        proc = _holder(folder)
        try:
            with pytest.raises(FolderBusy, match=rf"{folder.name} is in use by another training run: pid {proc.pid}"):
                command(str(folder))
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
    assert (staging / "shard-000000.tar").read_bytes() == b"the other miner's partial shard"
    assert not (tmp_path / "mined").exists()


def test_a_shard_build_into_a_folder_another_build_holds_is_refused_before_writing(tmp_path, capsys):
    """``clipmag-make-text-shards`` takes its OUT_DIR's lock as the trainers do: while another build
    holds it, a second stops in one line naming the holder, and no shard is written."""
    from text_retrieval.data.shards_cli import main

    out = tmp_path / "shards"
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text('{"query": "q", "positive": "d"}\n')
    with FolderLock(out, "shard build"):
        assert main([str(out), "--jsonl", str(pairs)]) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith(f"error: {out} is in use by another shard build: pid {os.getpid()}")
    assert sorted(p.name for p in out.iterdir()) == [LOCK_FILE]


def test_a_staging_folder_is_emptied_but_for_its_lock(tmp_path):
    with FolderLock(tmp_path / "index.partial", "index build") as lock:
        (lock.folder / "half").mkdir()
        (lock.folder / "half" / "written.bin").write_bytes(b"x")
        (lock.folder / "ids.json").write_text("[]")
        lock.empty()
        assert [p.name for p in lock.folder.iterdir()] == [LOCK_FILE]


def test_a_report_is_written_beside_a_running_sweep_but_two_reports_at_once_are_refused(tmp_path):
    """A report has a lock of its own: the sweep holding its folder does not stop it, a second
    report into the same folder does, before it writes anything."""
    from clipmag_experiments.report.build import REPORT_LOCK, build_report

    with FolderLock(tmp_path, "sweep"):  # the sweep still running
        with FolderLock(tmp_path, "report", REPORT_LOCK):  # a report being written
            with pytest.raises(FolderBusy, match="in use by another report"):
                build_report(tmp_path)
        with pytest.raises(FileNotFoundError, match="no finished sweep cells"):
            build_report(tmp_path)  # the report's own lock taken beside the sweep's; nothing to report
    assert not (tmp_path / "report.md").exists()
