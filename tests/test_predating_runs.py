"""Runs recorded before ``train.fast_dropout`` existed drew torch's dropout masks: a re-run, a resume
and a sweep continuation of such a run keep torch's dropout (the same run), a new run takes the
fast one, and the stored sweeps' cells stay finished."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
import yaml
from text_fixtures import REPO, tiny_train_args, write_code_search_set, write_tiny_bert

from clipmag.registry.config_packages import config_path
from clipmag.train.checkpoint import CHECKPOINT_DIR
from clipmag.train.checkpoint import files as ckpt_io
from clipmag.train.checkpoint.predating import recorded_overrides
from clipmag.train.checkpoint.resume_check import ResumeMismatch, check_resumable
from clipmag.train.loop_config import uses_fast_dropout
from clipmag_experiments.sweep import run as sweep
from clipmag_experiments.sweep.rerun import rerun_cell
from clipmag_experiments.sweep.rerun_comparison import numbers
from clipmag_experiments.sweep.status import sweep_status
from text_retrieval.cli import main, parse_args

KEY = "train.fast_dropout"
TORCH_DROPOUT = f"{KEY}=false"
STORED_SWEEPS = ("positive_regime", "hard_negatives")


@pytest.fixture
def args(tmp_path) -> list[str]:
    """A tiny BERT (dropout 0.1, so the masks matter) on the code-search set, constant schedule."""
    write_code_search_set(tmp_path)
    bert = write_tiny_bert(tmp_path / "bert")
    common = tiny_train_args(bert, tmp_path, tmp_path / "unused", "data.validation=[]", "train.threads=1")
    common += ["optim.schedule=constant", "optim.warmup_steps=1"]
    return [a for a in common if not a.startswith(("train.output_dir", "train.steps"))]


def _make_old(run: Path) -> None:
    """Make ``run`` (trained with torch's dropout) what a run recorded before the key is: no
    ``train.fast_dropout`` in its cell.json arguments, config.yaml, results.json or checkpoints."""
    cell = run / "cell.json"
    if cell.is_file():
        record = json.loads(cell.read_text())
        record["argv"] = [a for a in record["argv"] if a != TORCH_DROPOUT]
        cell.write_text(json.dumps(record))
    config = yaml.safe_load((run / "config.yaml").read_text())
    del config["train"]["fast_dropout"]
    (run / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    results = json.loads((run / "results.json").read_text())
    del results["provenance"]["config"]["train"]["fast_dropout"]
    (run / "results.json").write_text(json.dumps(results))
    for path in (run / CHECKPOINT_DIR).glob("*.pt"):
        ckpt = torch.load(path, weights_only=True)
        del ckpt["identity"][KEY], ckpt["config"]["train"]["fast_dropout"]
        torch.save(ckpt, path)


def _results(run: Path) -> dict:
    return json.loads((run / "results.json").read_text())


def _ran_with_torch_dropout(run: Path) -> bool:
    return _results(run)["provenance"]["config"]["train"]["fast_dropout"] is False


# ---- re-run ---------------------------------------------------------------------------------------
def test_stored_runs_rerun_with_the_dropout_they_ran_with(monkeypatch):
    """The sweeps stored before the key (positive regime, hard negatives) re-run with torch's dropout;
    the budget sweep, run after it, with the fast dropout its configs record."""
    records = sorted((REPO / "results").rglob("results.json"))
    predating = [p for p in records if any(f"results/{name}/" in p.as_posix() for name in STORED_SWEEPS)]
    assert len(predating) > 200
    for path in records:
        config = (json.loads(path.read_text()).get("provenance") or {}).get("config")
        if not isinstance((config or {}).get("train"), dict):
            continue  # not a training run (a RAG row, an evaluation's --train shards): nothing to re-run
        expected = [TORCH_DROPOUT] if path in predating else [f"{KEY}=true"]
        assert recorded_overrides(config) == expected, path
    monkeypatch.chdir(REPO)  # the stored argument list names configs/ relative to the repository
    stored = REPO / "results" / "positive_regime" / "scale-grid" / "splade" / "dnorm-scale5" / "seed0"
    argv = json.loads((stored / "cell.json").read_text())["argv"]
    assert uses_fast_dropout(parse_args(argv).train)  # a new run of the same arguments takes the fast dropout
    assert not parse_args([*argv, *recorded_overrides(_results(stored)["provenance"]["config"])]).train.fast_dropout


def test_a_rerun_of_a_cell_from_before_the_key_reproduces_it_exactly(args, tmp_path):
    group = sweep.SweepGroup(name="old", heads=["qnorm"], args=[*args, "train.steps=3", TORCH_DROPOUT])
    sweep.run_sweep(sweep.SweepConfig(output_dir=str(tmp_path / "runs"), groups=[group]))
    cell = tmp_path / "runs" / "old" / "default" / "qnorm" / "seed0"
    _make_old(cell)
    comparison = rerun_cell(cell, tmp_path / "again")
    assert comparison.exact and comparison.differences == [] and comparison.compared > 8
    assert _ran_with_torch_dropout(tmp_path / "again")


# ---- resume ---------------------------------------------------------------------------------------
def test_a_checkpoint_from_before_the_key_resumes_with_torch_dropout(args, tmp_path):
    whole, resumed = tmp_path / "whole", tmp_path / "resumed"
    main([*args, "train.steps=4", TORCH_DROPOUT, f"train.output_dir={whole}"])
    main([*args, "train.steps=2", TORCH_DROPOUT, f"train.output_dir={resumed}"])
    _make_old(resumed)
    with pytest.raises(ResumeMismatch, match="train.fast_dropout is False there and True here"):
        main([*args, "train.steps=4", "train.fast_dropout=true", f"train.output_dir={resumed}", "train.resume=latest"])
    main([*args, "train.steps=4", f"train.output_dir={resumed}", "train.resume=latest"])
    said = "latest.pt ran with train.fast_dropout=false: the resumed run keeps it"
    assert said in (resumed / "out.log").read_text()
    assert _ran_with_torch_dropout(resumed)
    assert yaml.safe_load((resumed / "config.yaml").read_text())["train"]["fast_dropout"] is False
    assert numbers(_results(resumed)["metrics"]) == numbers(_results(whole)["metrics"])


def test_a_resume_reads_its_checkpoint_once(args, tmp_path, monkeypatch):
    """The dropout setting is decided from the checkpoint before the model is built, and the trainer
    restores that same read: a checkpoint with its optimizer state is not read twice."""
    run = tmp_path / "run"
    main([*args, "train.steps=2", f"train.output_dir={run}"])
    reads, read = [], ckpt_io.load_checkpoint
    monkeypatch.setattr(ckpt_io, "load_checkpoint", lambda path: reads.append(path) or read(path))
    main([*args, "train.steps=3", f"train.output_dir={run}", "train.resume=latest"])
    assert [Path(p).name for p in reads] == ["latest.pt"]
    assert yaml.safe_load((run / "config.yaml").read_text())["train"]["fast_dropout"] is True


def test_the_resume_check_compares_an_old_checkpoint_as_torch_dropout():
    weights = {"w": torch.zeros(2)}
    old = {"identity": {"train.seed": 0}, "state_dict": weights}
    check_resumable(old, "old.pt", {"train.seed": 0, KEY: False}, weights)
    with pytest.raises(ResumeMismatch, match="train.fast_dropout is False there and True here"):
        check_resumable(old, "old.pt", {"train.seed": 0, KEY: True}, weights)
    check_resumable({**old, "identity": {"train.seed": 0, KEY: True}}, "new.pt", {"train.seed": 0, KEY: True}, weights)


# ---- sweep continuation and finished cells ----------------------------------------------------------
def test_a_sweep_continuing_a_cell_from_before_the_key_keeps_torch_dropout(args, tmp_path):
    runs = tmp_path / "runs"
    first = sweep.SweepGroup(name="budget-2", heads=["qnorm"], args=[*args, "train.steps=2", TORCH_DROPOUT])
    sweep.run_sweep(sweep.SweepConfig(output_dir=str(runs), groups=[first]))
    stored = runs / "budget-2" / "default" / "qnorm" / "seed0"
    _make_old(stored)
    before = (stored / "results.json").read_bytes()
    groups = [
        sweep.SweepGroup(name="budget-2", heads=["qnorm"], args=[*args, "train.steps=2"]),
        sweep.SweepGroup(name="budget-5", heads=["qnorm"], args=[*args, "train.steps=5"], continue_from="budget-2"),
        sweep.SweepGroup(name="whole-5", heads=["qnorm"], args=[*args, "train.steps=5", TORCH_DROPOUT]),
    ]
    sweep.run_sweep(sweep.SweepConfig(output_dir=str(runs), groups=groups, reuse_same_runs=False))
    assert (stored / "results.json").read_bytes() == before  # finished: not trained again under the new default
    continued, whole = (runs / g / "default" / "qnorm" / "seed0" for g in ("budget-5", "whole-5"))
    assert _ran_with_torch_dropout(continued)
    assert numbers(_results(continued)["metrics"]) == numbers(_results(whole)["metrics"])


@pytest.mark.parametrize("name", STORED_SWEEPS)
def test_the_stored_sweeps_cells_are_finished_although_they_predate_the_key(name, tmp_path, monkeypatch):
    """The stored cells (cell.json, config.yaml, results.json) under the run folder their sweep names,
    with the exports they tested (not stored in the repository) in place."""
    monkeypatch.chdir(tmp_path)
    cfg = sweep.load_sweep_config(config_path(f"configs/sweeps/{name}.yaml"))
    stored = sorted(p for p in (REPO / "results" / name).rglob("cell.json") if (p.parent / "results.json").is_file())
    assert stored
    for cell_file in stored:
        folder = Path(cfg.output_dir) / cell_file.parent.relative_to(REPO / "results" / name)
        folder.mkdir(parents=True)
        for file in ("cell.json", "config.yaml", "results.json"):
            if (cell_file.parent / file).is_file():
                shutil.copy(cell_file.parent / file, folder / file)
        Path(_results(folder)["checkpoint"]["path"]).mkdir(parents=True, exist_ok=True)
    cells = {c.label: c for c in sweep.expand(cfg)}
    status = sweep_status(cfg).splitlines()
    for cell_file in stored:
        label = str(cell_file.parent.relative_to(REPO / "results" / name))
        matching = [c for c in cells.values() if c.directory == Path(cfg.output_dir) / label]
        assert len(matching) == 1, label
        assert any(line.startswith("done") and line.endswith(f"  {matching[0].label}") for line in status), label
