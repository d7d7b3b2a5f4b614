"""The report names the code behind its tables and refuses to mix code states unless asked."""

from __future__ import annotations

import json

import pytest

from clipmag.config.entry import run_entry_point
from clipmag.results.record import build_results, write_results
from clipmag.scoring.head_record import HeadRecord
from clipmag_experiments.cli import report_main
from clipmag_experiments.design.protocol import PROTOCOL_FILE
from clipmag_experiments.report import build_report
from clipmag_experiments.report.provenance import MixedCode
from clipmag_experiments.report.stored import StoredSweep

CLEAN = {"commit": "a" * 40, "dirty": False, "diff_sha256": None, "reason": None}
OTHER = {"commit": "b" * 40, "dirty": False, "diff_sha256": None, "reason": None}
DIRTY = {"commit": "a" * 40, "dirty": True, "diff_sha256": "c" * 64, "reason": None}


def _cell(root, head: str, seed: int, code: dict | None) -> None:
    folder = root / "g" / "default" / head / f"seed{seed}"
    folder.mkdir(parents=True)
    metric = {"NDCG@10": 0.5 + 0.01 * seed + (0.02 if head == "cosine" else 0.0)}
    (folder / "cell.json").write_text(json.dumps({"group": "g", "kind": "text", "head": head, "seed": seed}))
    record = build_results({"steps": 3, "seed": seed}, HeadRecord({"name": head}), {}, {"set": metric}, {}, {})
    if code is None:
        del record["provenance"]  # written before results named their code
    else:
        record["provenance"]["code"] = code
    write_results(record, folder)


def test_one_clean_commit_is_named_under_every_table(tmp_path):
    for head in ("cosine", "dot"):
        for seed in (0, 1):
            _cell(tmp_path, head, seed, CLEAN)
    report = build_report(tmp_path).read_text()
    assert f"Code: commit {'a' * 12} (4 runs)." in report
    retrieval = report[report.index("## Retrieval") :]
    assert retrieval.split("\n")[2] == f"Code: commit {'a' * 12} (4 runs)."


MINORITY = "(2 runs: g/default/cosine/seed2, g/default/dot/seed2)"


@pytest.mark.parametrize(
    ("code", "label"),
    [
        (OTHER, f"commit {'b' * 12}"),
        (DIRTY, f"commit {'a' * 12}, dirty tree (diff {'c' * 12})"),
        (None, "no commit recorded (written before results named their code)"),
    ],
)
def test_mixed_code_states_are_refused_naming_the_cells_unless_allowed(tmp_path, capsys, code, label):
    for seed, state in enumerate((CLEAN, CLEAN, code)):
        for head in ("cosine", "dot"):
            _cell(tmp_path, head, seed, state)
    with pytest.raises(SystemExit) as err:
        run_entry_point(report_main, [str(tmp_path)])
    message = capsys.readouterr().err
    assert err.value.code == 2 and message.count("\n") == 1 and "Traceback" not in message
    assert f"commit {'a' * 12} (4 runs); {label} {MINORITY}" in message and "--allow-mixed" in message
    report = report_main([str(tmp_path), "--allow-mixed"]).read_text()
    mixed = f"Code: **mixed** - commit {'a' * 12} (4 runs); {label} {MINORITY}."
    retrieval = report[report.index("## Retrieval") :]
    assert mixed in report.split("## ")[0] and retrieval.split("\n")[2] == mixed  # at the top and under the table


def test_one_dirty_tree_is_refused_too(tmp_path):
    for head in ("cosine", "dot"):
        _cell(tmp_path, head, 0, DIRTY)
    with pytest.raises(MixedCode, match=r"dirty tree \(diff c{12}\) \(2 runs, every cell\)"):
        build_report(tmp_path)


def _toy_sweep(tmp_path, monkeypatch) -> str:
    from clipmag.registry.front_ends import FRONT_ENDS, FrontEnd
    from clipmag_experiments.sweep import run as sweep

    monkeypatch.setitem(FRONT_ENDS, "toy", FrontEnd("toy", "toy_frontend"))
    group = sweep.SweepGroup(name="toy", kind="toy", heads=["cosine", "dot"], seeds=[0])
    cfg = sweep.SweepConfig(output_dir=str(tmp_path / "runs"), groups=[group])
    sweep.run_sweep(cfg)
    return cfg.output_dir


def test_a_sweep_run_here_reports_the_code_state_it_ran_at(tmp_path, monkeypatch):
    """Whatever this checkout's state (clean in CI, dirty while being edited), the report says it."""
    from clipmag.results.provenance import code_state, describe_code

    report = build_report(_toy_sweep(tmp_path, monkeypatch), allow_mixed=True).read_text()
    assert f"Code: {describe_code(code_state())} (2 runs)." in report


def test_a_sweep_at_one_clean_commit_needs_no_allow_mixed(tmp_path, monkeypatch):
    monkeypatch.setattr("clipmag.results.provenance.code_state", lambda: dict(CLEAN))
    report = build_report(_toy_sweep(tmp_path, monkeypatch)).read_text()
    assert f"Code: commit {'a' * 12} (2 runs)." in report and "mixed" not in report


def test_the_manuals_cite_several_code_states_only_where_the_protocol_record_shows_each(tmp_path):
    """A protocol amended mid-sweep runs its last cells at the amendment's commit: the manuals then
    cite both states with their runs, as long as sweep.json recorded a start at each."""
    for seed, state in enumerate((CLEAN, CLEAN, OTHER)):
        for head in ("cosine", "dot"):
            _cell(tmp_path, head, seed, state)
    with pytest.raises(ValueError, match=r"commit a{12} \(4 runs\) is not a clean commit recorded as a start"):
        StoredSweep(tmp_path).code()
    starts = [{"code": CLEAN}, {"code": OTHER}]
    (tmp_path / PROTOCOL_FILE).write_text(json.dumps({"starts": starts}))
    assert StoredSweep(tmp_path).runs_at() == "6 runs at commit `aaaaaaa` (4 runs) and commit `bbbbbbb` (2 runs)"
