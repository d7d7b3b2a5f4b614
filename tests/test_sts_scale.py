"""STS gold scales: each format declares its range, training regresses onto gold mapped to [0, 1],
and a score outside the declared range stops with the file and line named."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from text_fixtures import SICK, STSB, require

from clipmag.config.build import build_config
from clipmag.errors import ConfigError
from clipmag.runtime.distributed import DistributedContext
from text_retrieval.config import TextConfig
from text_retrieval.data.loaders.reading import DataFormatError
from text_retrieval.data.loaders.sts import load_sts, load_sts_file
from text_retrieval.task import TextRetrievalTask


def _task(train, *overrides: str) -> TextRetrievalTask:
    cfg = build_config(TextConfig, None, ["objective=sts", f"data.train={train}", "data.validation=[]", *overrides])
    return TextRetrievalTask(cfg, DistributedContext(0, 1, 0, torch.device("cpu"), None))


def _stsb_lines(count: int) -> list[str]:
    return (require(STSB) / "sts-train.csv").read_text(encoding="utf-8").splitlines(keepends=True)[:count]


def test_stsb_training_targets_are_gold_over_five():
    path = require(STSB) / "sts-train.csv"
    pairs = load_sts_file(path)
    assert pairs.scores.max() == 5.0 and pairs.scores.min() == 0.0  # kept on the file's own scale
    task = _task(path, "data.batch_size=64")
    batch = next(task.train_batches(0))
    gold: dict[tuple[str, str], set[float]] = {}
    for a, b, score in zip(pairs.a, pairs.b, pairs.scores):
        gold.setdefault((a, b), set()).add(float(score))
    assert all(
        any(target == pytest.approx(g / 5.0) for g in gold[(a, b)])
        for a, b, target in zip(batch["text_a"], batch["text_b"], batch["score"])
    )
    unit = task.sts_train_pairs(path).unit_scores()
    assert unit.min() == 0.0 and unit.max() == 1.0


def test_sick_targets_start_at_one():
    sick = load_sts(require(SICK), split="train")[0]
    assert (sick.gold_scale.lo, sick.gold_scale.hi) == (1.0, 5.0)
    np.testing.assert_allclose(sick.unit_scores(), (sick.scores - 1.0) / 4.0)


def test_score_of_seven_in_stsb_names_the_line(tmp_path):
    lines = _stsb_lines(4)
    fields = lines[2].split("\t")
    fields[4] = "7.000"
    lines[2] = "\t".join(fields)
    bad = tmp_path / "sts-train.csv"
    bad.write_text("".join(lines), encoding="utf-8")
    expected = r"sts-train\.csv, line 3: expected a gold score in \[0, 5\] \(the STS Benchmark scale\) in field 5"
    with pytest.raises(DataFormatError, match=expected + ", found '7.000'"):
        load_sts_file(bad)
    with pytest.raises(DataFormatError, match=expected):
        next(_task(bad).train_batches(0))


def test_generic_tsv_needs_a_declared_range_beyond_unit(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text("a cat\ta dog\t0.5\na car\ta bus\t3.5\nsky\tsea\t5\n", encoding="utf-8")
    assert load_sts_file(path).gold_scale is None  # evaluation reads any scale (ranks do not care)
    with pytest.raises(DataFormatError, match=r"pairs\.tsv, line 2: .*set data\.sts_range=\[lo,hi\].*found '3\.5'"):
        next(_task(path).train_batches(0))
    batch = next(_task(path, "data.sts_range=[0,5]", "data.batch_size=3").train_batches(0))
    assert sorted(batch["score"]) == pytest.approx([0.1, 0.7, 1.0])
    with pytest.raises(DataFormatError, match=r"line 3: expected a gold score in \[0, 4\] \(data\.sts_range\)"):
        next(_task(path, "data.sts_range=[0,4]").train_batches(0))
    with pytest.raises(ConfigError, match=r"data\.sts_range' expects \[lo, hi\] with lo < hi"):
        build_config(TextConfig, None, ["data.sts_range=[5,0]"])
