"""Contriever-style pairs: two independent random crops of one document, as a data mode of the text
trainer (``data.pairs=crops``), seeded so that a resume and any number of ranks give the same pairs."""

from __future__ import annotations

import random

import pytest
from text_fixtures import tiny_train_args, write_code_search_set, write_tiny_bert

from clipmag.config.build import build_config
from clipmag.errors import ConfigError
from text_retrieval.cli import main as train_main
from text_retrieval.config import TextConfig, resolve_text_config
from text_retrieval.data.training.crops import crop_pair, cropped_batches, random_crop

DOCUMENT = " ".join(f"w{i}" for i in range(200))


def _is_span(crop: str, words: list[str]) -> bool:
    parts = crop.split()
    return any(words[i : i + len(parts)] == parts for i in range(len(words) - len(parts) + 1))


def test_crops_are_contiguous_spans_of_the_drawn_share():
    words = DOCUMENT.split()
    rng = random.Random(0)
    lengths = []
    for _ in range(300):
        crop = random_crop(words, (0.1, 0.5), rng)
        assert _is_span(crop, words)
        lengths.append(len(crop.split()))
    assert min(lengths) >= 20 and max(lengths) <= 100 and max(lengths) - min(lengths) > 50
    assert random_crop(["one"], (0.1, 0.1), rng) == "one"  # at least one word


def test_crop_pairs_are_independent_and_seeded_by_run_step_and_text():
    first = crop_pair(DOCUMENT, (0.1, 0.5), seed=0, micro_batch=3)
    assert first == crop_pair(DOCUMENT, (0.1, 0.5), seed=0, micro_batch=3)
    assert first[0] != first[1]  # two independent draws
    assert first != crop_pair(DOCUMENT, (0.1, 0.5), seed=1, micro_batch=3)
    assert first != crop_pair(DOCUMENT, (0.1, 0.5), seed=0, micro_batch=4)  # a document read again: new pair
    batches = iter([{"query": ["a", "b"], "positive": [DOCUMENT, "x y z"], "negatives": [[], []]}])
    batch = next(cropped_batches(batches, (0.1, 0.5), seed=0, start=3))
    assert (batch["query"][0], batch["positive"][0]) == first and batch["negatives"] == [[], []]
    with pytest.raises(ValueError, match="no words"):
        crop_pair("  ", (0.1, 0.5), 0, 0)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["data.crop_ratio=[0.5, 0.1]"], "data.crop_ratio"),
        (["data.crop_ratio=[0.0, 0.5]"], "data.crop_ratio"),
        (["data.pairs=crops", "data.hard_negatives=1"], "data.hard_negatives=0"),
        (["data.pairs=crops", "objective=sts"], "objective=retrieval"),
    ],
)
def test_crop_settings_are_checked(overrides, message):
    with pytest.raises(ConfigError, match=message):
        resolve_text_config(build_config(TextConfig, None, overrides))


def test_crop_mode_trains_records_itself_and_refuses_a_resume_on_given_pairs(tmp_path):
    write_code_search_set(tmp_path)
    model = write_tiny_bert(tmp_path / "bert")
    out = tmp_path / "run"
    extra = ("data.pairs=crops", "data.crop_ratio=[0.2, 0.6]", "train.steps=2", "train.eval_every=2", "--norm", "dot")
    results = train_main(tiny_train_args(model, tmp_path, out, *extra))
    assert results["run"]["pairs"] == "crops" and results["run"]["crop_ratio"] == [0.2, 0.6]
    resumed = tiny_train_args(model, tmp_path, out, "train.steps=2", "--norm", "dot", "--resume", "latest")
    with pytest.raises(ValueError, match="pairs"):
        train_main(resumed)


def test_crops_resume_where_they_stopped(tmp_path):
    """A stream resumed at micro-batch 2 crops what the uninterrupted stream cropped there."""
    from itertools import islice

    from text_retrieval.data.training.shards import TextShardStream

    write_code_search_set(tmp_path)

    def crops(start: int, n: int) -> list[dict]:
        stream = TextShardStream(tmp_path / "shards", batch_size=4, seed=1)
        return list(islice(cropped_batches(stream.batches(start), (0.1, 0.5), seed=1, start=start), n))

    assert crops(0, 4)[2:] == crops(2, 2)


def test_the_contriever_style_pretraining_config_trains_on_crops_under_the_dot_product():
    from text_retrieval.cli import parse_args

    run = parse_args(["--config", "configs/text/pretrain_contriever_style.yaml"])
    assert run.data.pairs == "crops" and tuple(run.data.crop_ratio) == (0.1, 0.5) and run.data.hard_negatives == 0
    assert run.head.name == "dot" and run.model.pooling == "mean" and run.model.name == "all-MiniLM-L6-v2"
    assert run.data.validation == [] and run.data.train == "runs/data/pretrain-corpus/shards"
    assert run.loss.direction == "q2d" and run.loss.scale == 20.0 and run.train.steps * run.data.batch_size == 128_000
