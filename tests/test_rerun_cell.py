"""clipmag-rerun-cell re-runs a finished cell from its record into a fresh folder and compares."""

from __future__ import annotations

import json
import logging

import pytest
import torch
from text_fixtures import TINY_SIZES, minilm_path, tiny_train_args, write_code_search_set

from clipmag.registry.front_ends import FRONT_ENDS, FrontEnd
from clipmag.runtime.machine import cpu_name
from clipmag_experiments.manuals.reruns import BLOCKS, cell_label
from clipmag_experiments.report.stored import StoredResults
from clipmag_experiments.sweep import run as sweep
from clipmag_experiments.sweep.rerun import rerun_cell, rerun_main
from clipmag_experiments.sweep.rerun_comparison import compare_results, read_records


@pytest.fixture(autouse=True)
def _console_logging_undone():
    """rerun_main logs to the console stream of its test; later tests get the logger as it was."""
    log = logging.getLogger("clipmag")
    handlers, propagate, level = list(log.handlers), log.propagate, log.level
    yield
    log.handlers[:], log.propagate = handlers, propagate
    log.setLevel(level)


@pytest.fixture
def cell(monkeypatch, tmp_path):
    monkeypatch.setitem(FRONT_ENDS, "toy", FrontEnd("toy", "toy_frontend"))
    group = sweep.SweepGroup(name="toy", kind="toy", heads=["qnorm"], seeds=[1])
    sweep.run_sweep(sweep.SweepConfig(output_dir=str(tmp_path / "runs"), groups=[group]))
    return tmp_path / "runs" / "toy" / "default" / "qnorm" / "seed1"


def _edit(cell, change) -> None:
    path = cell / "results.json"
    record = json.loads(path.read_text())
    change(record)
    path.write_text(json.dumps(record))


def test_a_rerun_matches_its_record_exactly_and_leaves_the_cell_alone(cell, tmp_path, capsys):
    before = (cell / "results.json").read_bytes()
    comparison = rerun_main([str(cell), "--output", str(tmp_path / "again")])
    assert comparison.exact and comparison.differences == [] and comparison.compared >= 2
    assert (cell / "results.json").read_bytes() == before and (tmp_path / "again" / "results.json").is_file()
    again = json.loads((tmp_path / "again" / "cell.json").read_text())
    assert again["argv"][again["argv"].index("--output") + 1] == str(tmp_path / "again")
    assert "exact (same commit, numerics and world size): 0 differ" in capsys.readouterr().out


def test_a_changed_number_is_named_in_the_table_with_exit_status_1(cell, tmp_path, capsys):
    _edit(cell, lambda r: r["metrics"]["toy"].update({"NDCG@10": r["metrics"]["toy"]["NDCG@10"] + 0.05}))
    with pytest.raises(SystemExit) as err:
        rerun_main([str(cell)])  # into a temporary folder
    out = capsys.readouterr().out
    assert err.value.code == 1 and ": 1 differ" in out
    assert "| metrics/toy/NDCG@10 | 0.51 | 0.46 | -0.05 |" in out


def test_another_commit_warns_and_compares_within_the_tolerance(cell, caplog):
    def other_commit(record):
        record["provenance"]["code"] = {"commit": "b" * 40, "dirty": False, "diff_sha256": None, "reason": None}
        record["metrics"]["toy"]["NDCG@10"] += 0.005

    _edit(cell, other_commit)
    with caplog.at_level(logging.WARNING, logger="clipmag"):
        comparison = rerun_cell(cell)
    assert f"recorded at commit {'b' * 12}, re-run at " in caplog.text
    assert not comparison.exact and comparison.differences == [] and comparison.reasons[0].startswith("code commit b")
    assert rerun_cell(cell, tolerance=0.001).differences[0].name == "metrics/toy/NDCG@10"


def test_record_keeps_one_entry_per_cell_and_the_manuals_render_it(cell, tmp_path, monkeypatch):
    """--record adds the comparison to a re-run file, replacing its cell's earlier entry; the manuals'
    re-run table is rendered from that file."""
    record = tmp_path / "results" / "reruns" / "positive_regime.json"
    rerun_main([str(cell), "--record", str(record)])
    _edit(cell, lambda r: r["metrics"]["toy"].update({"NDCG@10": r["metrics"]["toy"]["NDCG@10"] + 0.05}))
    with pytest.raises(SystemExit):
        rerun_main([str(cell), "--record", str(record)])
    (entry,) = read_records(record)
    assert entry["cell"] == str(cell) and entry["exact"] and entry["differ"] == 1
    assert entry["largest_difference"] == pytest.approx(0.05) and entry["cpu"] == cpu_name()
    assert entry["differences"][0][0] == "metrics/toy/NDCG@10" and entry["stored_code"] == entry["rerun_code"]
    (row,) = BLOCKS["reruns-positive-regime"](StoredResults(tmp_path / "results")).splitlines()[2:]
    assert f"| `{cell}` |" in row and "| exactly | 1 | 0.05 |" in row


def test_the_manuals_name_a_cell_from_its_results_folder_not_the_machine_path():
    assert cell_label("/work/main/results/positive_regime/scifact/splade/qnorm/seed0") == (
        "results/positive_regime/scifact/splade/qnorm/seed0"
    )
    assert cell_label("runs/demo/code-search/default/cosine/seed0") == "runs/demo/code-search/default/cosine/seed0"


def test_the_tolerance_is_absolute_for_scores_relative_above_one_and_skips_per_query_detail():
    stored = {
        "numerics": {"torch_threads": 2},
        "metrics": {"d": {"NDCG@10": 0.5, "norm": 10.0, "per_query": {"q1": {"NDCG@10": 1.0}}, "timings": {"s": 1}}},
    }
    rerun = {
        "numerics": {"torch_threads": 1},
        "metrics": {"d": {"NDCG@10": 0.515, "norm": 10.15, "per_query": {"q1": {"NDCG@10": 0.0}}, "timings": {"s": 2}}},
    }
    comparison = compare_results(stored, rerun, 0.02)
    assert comparison.reasons[0] == "torch_threads 2 -> 1" and comparison.differences == []
    assert comparison.compared == 2  # the two summary numbers; per-query scores and durations are not compared
    assert [d.name for d in compare_results(stored, rerun, 0.01).differences] == ["metrics/d/NDCG@10", "metrics/d/norm"]
    same = compare_results({**stored, "numerics": rerun["numerics"]}, rerun, 0.02)
    assert same.exact is False  # neither records a commit: never "the same code"
    stored["provenance"] = rerun["provenance"] = {"code": {"commit": "a" * 40, "dirty": False, "diff_sha256": None}}
    exact = compare_results({**stored, "numerics": rerun["numerics"]}, rerun, 0.02)
    assert exact.exact and {d.name for d in exact.differences} == {
        "metrics/d/NDCG@10",
        "metrics/d/norm",
        "metrics/d/per_query/q1/NDCG@10",
    }


def test_the_output_is_never_the_stored_cell_nor_a_used_folder(cell, tmp_path):
    with pytest.raises(ValueError, match="inside the stored cell"):
        rerun_main([str(cell), "--output", str(cell / "again")])
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "x").write_text("")
    with pytest.raises(ValueError, match="exists and is not an empty folder"):
        rerun_main([str(cell), "--output", str(tmp_path / "used")])
    with pytest.raises(FileNotFoundError, match="no cell.json"):
        rerun_main([str(tmp_path)])


def test_a_real_text_cell_reproduces_every_number_including_per_query_scores(tmp_path):
    """A tiny BERT fine-tuned for 4 steps by the text trainer, re-run in this process: same code,
    same numerics, so every number - per-query nDCG and document norms included - is equal."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    tokenizer = AutoTokenizer.from_pretrained(minilm_path())
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=tokenizer.vocab_size, num_attention_heads=2, **TINY_SIZES)).save_pretrained(
        tmp_path / "tiny"
    )
    tokenizer.save_pretrained(tmp_path / "tiny")
    write_code_search_set(tmp_path)
    args = [a for a in tiny_train_args(tmp_path / "tiny", tmp_path, tmp_path / "unused") if "output_dir" not in a]
    group = sweep.SweepGroup(name="text", heads=["qnorm"], args=[*args, "train.steps=4", "train.threads=1"])
    sweep.run_sweep(sweep.SweepConfig(output_dir=str(tmp_path / "runs"), groups=[group]))
    comparison = rerun_cell(tmp_path / "runs" / "text" / "default" / "qnorm" / "seed0", tmp_path / "again")
    assert comparison.exact and comparison.differences == []
    assert comparison.compared > 8 + 8 + 48  # summaries, per-query scores of 8 queries, norms of 48 documents
