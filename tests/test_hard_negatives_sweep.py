"""The hard-negatives sweep expands to the cells its header documents, each mined variant reading
the shards a prepare step mines under that variant's own head, and the random control reading the
same number of negatives drawn at random from the same pool."""

from __future__ import annotations

import importlib

from clipmag.registry.config_packages import config_path
from clipmag_experiments.sweep import run as sweep
from text_retrieval.cli import parse_args as parse_train_args
from text_retrieval.retrieval.mine_cli import parse_args


def test_the_hard_negatives_sweep_expands_as_documented():
    path = config_path("configs/sweeps/hard_negatives.yaml")
    cfg = sweep.load_sweep_config(path)
    steps = {s.name: s for s in cfg.prepare}
    assert list(steps) == ["scifact-train-shards", "mine-cosine", "mine-qnorm", "random-negatives"]
    assert all(callable(importlib.import_module(s.module).main) for s in cfg.prepare)
    assert all("data/beir/scifact" in s.requires for s in cfg.prepare)
    mined_by = {}
    for name in ("mine-cosine", "mine-qnorm"):
        mining = parse_args(steps[name].args)
        assert steps[name].creates == f"{mining.output}/manifest.json"
        assert (mining.data, mining.split, mining.corpus) == (
            "data/beir/scifact",
            "train",
            "data/beir/scifact/corpus.jsonl",
        )
        rules = mining.rules
        assert (rules.num_negatives, rules.rank_min, rules.relative_margin, rules.sampling) == (3, 0, 0.05, "top")
        assert mining.cache_dir == "runs/data/scifact-mining-cache" and rules.rank_max >= 5183
        mined_by[mining.head.name] = mining.output
    assert set(mined_by) == {"cosine", "qnorm"}
    random = parse_args(steps["random-negatives"].args)
    assert (random.corpus, random.pool, random.rules.num_negatives, random.rules.sampling) == (
        mining.corpus,
        "corpus",
        3,
        "random",
    )
    assert random.rules.rank_min == 0 and random.rules.rank_max >= 5183 and random.rules.relative_margin is None
    assert random.rules.absolute_margin is None and random.rules.max_score is None

    cells = sweep.expand(cfg)
    sweep.check_cells(cells, str(path))  # every cell parses with the text trainer's own config
    assert len(cells) == 6 * 3 and {c.seed for c in cells} == {0, 1, 2}
    kinds = ("", "-mined", "-random")
    assert {c.variant for c in cells} == {f"{head}{kind}" for head in ("cosine", "qnorm") for kind in kinds}
    plain = steps["scifact-train-shards"].args[0]
    for cell in cells:
        run = parse_train_args(cell.argv)
        norm = run.head.name
        assert cell.variant.split("-")[0] == norm and run.model.name == "all-MiniLM-L6-v2"
        if cell.variant.endswith("-mined"):
            assert run.data.train == mined_by[norm] and run.data.hard_negatives == 3
        elif cell.variant.endswith("-random"):
            assert run.data.train == random.output and run.data.hard_negatives == 3
        else:
            assert run.data.train == plain and run.data.hard_negatives == 0
        assert (run.train.steps, run.data.batch_size, run.optim.lr, run.loss.scale) == (60, 16, 5e-5, 20.0)
        assert (run.model.query_max_length, run.model.document_max_length) == (64, 64)
        assert run.data.test == ["data/beir/scifact", "data/beir/cranfield"]
