"""Budgets as checkpoints of one long run: a group that continues an earlier group's cells trains on
from their final checkpoints, gives what one uninterrupted run of its length gives under a constant
schedule, and is refused under a schedule planned for the shorter run."""

from __future__ import annotations

import json

import pytest
import torch
from text_fixtures import TINY_SIZES, minilm_path, tiny_train_args, write_code_search_set

from clipmag_experiments.slurm.jobs import SweepUnfinished
from clipmag_experiments.sweep import run as sweep
from clipmag_experiments.sweep.rerun_comparison import numbers


@pytest.fixture
def tiny(tmp_path):
    from transformers import AutoTokenizer, BertConfig, BertModel

    tokenizer = AutoTokenizer.from_pretrained(minilm_path())
    torch.manual_seed(0)
    config = BertConfig(vocab_size=tokenizer.vocab_size, num_attention_heads=2, **TINY_SIZES)
    BertModel(config).save_pretrained(tmp_path / "tiny")
    tokenizer.save_pretrained(tmp_path / "tiny")
    write_code_search_set(tmp_path)
    args = tiny_train_args(tmp_path / "tiny", tmp_path, tmp_path / "unused", "data.validation=[]", "train.threads=1")
    return [a for a in args if not a.startswith(("train.output_dir", "train.steps"))]


def _groups(args: list[str], schedule: str) -> list[sweep.SweepGroup]:
    common = [*args, f"optim.schedule={schedule}", "optim.warmup_steps=1", "optim.lr=1e-3"]
    return [
        sweep.SweepGroup(name="budget-2", heads=["qnorm"], args=[*common, "train.steps=2"]),
        sweep.SweepGroup(name="budget-5", heads=["qnorm"], args=[*common, "train.steps=5"], continue_from="budget-2"),
        sweep.SweepGroup(name="whole-5", heads=["qnorm"], args=[*common, "train.steps=5"]),
    ]


def _metrics(folder) -> dict[str, float]:
    return numbers(json.loads((folder / "results.json").read_text())["metrics"])


def test_a_continued_cell_gives_what_one_uninterrupted_run_of_its_length_gives(tiny, tmp_path):
    runs = tmp_path / "runs"
    cfg = sweep.SweepConfig(output_dir=str(runs), groups=_groups(tiny, "constant"), reuse_same_runs=False)
    sweep.run_sweep(cfg)
    continued, whole = (runs / g / "default" / "qnorm" / "seed0" for g in ("budget-5", "whole-5"))
    assert json.loads((continued / "cell.json").read_text())["continues"] == str(
        runs / "budget-2" / "default" / "qnorm" / "seed0"
    )
    steps = [json.loads(line)["step"] for line in (continued / "metrics.jsonl").read_text().splitlines()]
    assert steps and min(steps) > 2  # it trained steps 3-5 only, on from the earlier cell's step 2
    assert _metrics(continued) == _metrics(whole)  # per-query scores and document norms included
    assert len(_metrics(whole)) > 16


def test_a_schedule_planned_for_the_shorter_run_is_not_continued(tiny, tmp_path):
    cfg = sweep.SweepConfig(output_dir=str(tmp_path / "runs"), groups=_groups(tiny, "cosine")[:2])
    with pytest.raises(SweepUnfinished, match="ResumeMismatch: .*cosine schedule was planned for 2 steps"):
        sweep.run_sweep(cfg)


def test_a_continuation_needs_an_earlier_group_and_runs_in_order(tiny, tmp_path):
    groups = _groups(tiny, "constant")
    groups[1].continue_from = "whole-5"
    with pytest.raises(ValueError, match="continue_from 'whole-5' is not a group listed before it"):
        sweep.expand(sweep.SweepConfig(groups=groups))
    groups[1].continue_from = "budget-2"
    with pytest.raises(ValueError, match="continue_from needs each cell to start after the one it continues"):
        sweep.expand(sweep.SweepConfig(groups=groups, launcher="slurm"))
    with pytest.raises(SweepUnfinished, match="continues budget-2/qnorm/seed0, which is not finished"):
        sweep.run_sweep(sweep.SweepConfig(output_dir=str(tmp_path / "runs"), groups=groups), only=["budget-5"])
