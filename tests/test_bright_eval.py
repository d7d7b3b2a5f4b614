"""BRIGHT evaluation end to end: the command line in its three settings scores as the official code
does, evaluation-time encoding, hub sentence-transformers settings, and the report's task mean."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from bright_fixtures import REVISION, download_all_settings, example_rows, official_scores, write_hub_tree
from text_fixtures import minilm_encoder, minilm_path

import text_retrieval.evaluation.cli as eval_cli
from clipmag.results.record import build_results, write_results
from clipmag.scoring.head_record import HeadRecord
from clipmag_experiments.report import build_report
from clipmag_experiments.sweep.run import CELL_FILE
from text_retrieval.data.loaders import BrightDataset, load_bright, load_eval_datasets
from text_retrieval.data.loaders.bright import BRIGHT_TASKS
from text_retrieval.evaluation.evaluate import evaluate_retrieval
from text_retrieval.evaluation.metrics import read_trec_run
from text_retrieval.retrieval.encoding import evaluation_encoding, model_length_limit


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return download_all_settings(write_hub_tree(tmp_path_factory.mktemp("hub")), tmp_path_factory.mktemp("bright"))


@pytest.mark.parametrize(
    "flags, config, long, names",
    [
        ([], "examples", False, ["bright-biology", "bright-leetcode", "bright-pony"]),
        (["--long-documents"], "examples", True, ["bright-biology-long", "bright-pony-long"]),
        (
            ["--reasoning", "gpt4_reason"],
            "gpt4_reason",
            False,
            [f"bright-{t}-gpt4_reason" for t in ("biology", "leetcode", "pony")],
        ),
    ],
)
def test_cli_scores_each_setting_as_the_official_code(root, tmp_path, capsys, flags, config, long, names):
    records = eval_cli.main(
        ["--model", minilm_path(), "--data", str(root), "--output", str(tmp_path), "--quiet", *flags]
    )
    assert [r["dataset"] for r in records] == names
    for record in records:
        task = record["config"]["bright"]["task"]
        official = official_scores(example_rows(task, config), read_trec_run(record["run_file"]), long)
        for metric, value in official.items():
            assert record["metrics"][metric] == pytest.approx(value, abs=1e-12), (record["dataset"], metric)
        bright = record["config"]["bright"]
        assert (bright["revision"], bright["long_documents"], bright["missing_gold_ids"]) == (REVISION, long, 0)
        assert bright["reasoning"] == (config if config != "examples" else None)
        # evaluation-time lengths: MiniLM's own limit (its sentence-transformers max_seq_length), not a training length
        assert record["config"]["document_max_length"] == record["config"]["model_length_limit"] == 256
    ndcg = np.mean([r["metrics"]["NDCG@10"] for r in records])
    assert f"mean over {len(names)} tasks  NDCG@10 {ndcg:.4f}" in capsys.readouterr().out


def test_missing_gold_ids_lower_the_score_exactly_as_officially(root, tmp_path):
    task = tmp_path / "pony"
    task.mkdir()
    (task / "documents.jsonl").write_text((root / "pony" / "documents.jsonl").read_text())
    rows = example_rows("pony")
    rows[0]["gold_ids"] = ["pony-actors-0", "pony-removed-page-0"]  # the second is not in the corpus
    (task / "examples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    dataset = load_bright(task)
    result = evaluate_retrieval(minilm_encoder(), dataset, run_file=tmp_path / "run.trec", show_progress=False)
    official = official_scores(rows, read_trec_run(result["run_file"]), long=False)
    assert result["NDCG@10"] == pytest.approx(official["NDCG@10"], abs=1e-12) and official["NDCG@10"] < 1
    assert result["per_query"]["0"]["Recall@100"] == 0.5  # the missing id counts: it can never be found
    assert result["data"]["missing_gold_ids"] == 1


def test_settings_file_datasets_carry_prefixes_and_lengths_into_any_evaluation(root, tmp_path, monkeypatch):
    monkeypatch.chdir(root.parent)
    spec = tmp_path / "instruct.yaml"
    spec.write_text(
        f"bright: {root.name}\nname: instruct\nmax_length_cap: 32\n"
        "query_prefix:\n  default: 'Represent this {task} post: '\n  leetcode: 'Represent this coding problem: '\n"
    )
    by_task = {d.task: d for d in load_eval_datasets(spec)}
    pony, leetcode = by_task["pony"], by_task["leetcode"]
    encoder = minilm_encoder(query_max_length=64, document_max_length=64)
    used = evaluate_retrieval(encoder, leetcode, show_progress=False)["encoding"]  # as a trainer's test phase calls it
    assert used["query_prefix"] == "Represent this coding problem: " and used["document_prefix"] == ""  # the model's
    assert used["query_max_length"] == used["document_max_length"] == 32 == min(model_length_limit(encoder), 32)
    assert (encoder.query_prefix, encoder.query_max_length) == ("", 64)  # the model's own settings again
    with evaluation_encoding(encoder, pony.settings, pony.task) as used:
        assert encoder.query_prefix == used["query_prefix"] == "Represent this pony post: "
    assert isinstance(pony, BrightDataset) and (pony.name, pony.suite) == ("bright-pony@instruct", "bright@instruct")


def test_hub_model_reads_its_sentence_transformers_settings(tmp_path, monkeypatch):
    import huggingface_hub

    import text_retrieval.model.encoder as encoder_module
    import text_retrieval.model.pooling as pooling_module

    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "sentence_bert_config.json").write_text('{"max_seq_length": 128}')
    (tmp_path / "1_Pooling" / "config.json").write_text('{"pooling_mode_cls_token": true}')
    asked = []

    def hub_download(repo_id, filename, **kwargs):
        asked.append((repo_id, filename))
        return str(tmp_path / filename)

    class FromLocalCopy:  # the weights and tokenizer of "org/cls-model" are MiniLM's, loaded offline
        def __init__(self, auto):
            self.auto = auto

        def from_pretrained(self, name, **kwargs):
            assert name == "org/cls-model"
            return self.auto.from_pretrained(minilm_path(), **kwargs)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", hub_download)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)  # the hub above is reachable
    monkeypatch.setattr(pooling_module, "AutoModel", FromLocalCopy(pooling_module.AutoModel))
    monkeypatch.setattr(encoder_module, "AutoTokenizer", FromLocalCopy(encoder_module.AutoTokenizer))
    loaded = encoder_module.TextEncoder.from_pretrained("org/cls-model")
    assert (loaded.pooling, loaded.query_max_length, loaded.document_max_length) == ("cls", 128, 128)
    assert ("org/cls-model", "1_Pooling/config.json") in asked and model_length_limit(loaded) == 128
    monkeypatch.setattr(loaded.model.config, "max_position_embeddings", 100)
    assert model_length_limit(loaded) == 100  # a declared length never exceeds the position embeddings


def _cell(runs, head, seed, metrics):
    folder = runs / "paper" / "default" / head / f"seed{seed}"
    folder.mkdir(parents=True)
    cell = {"group": "paper", "kind": "text", "model": None, "head": head, "variant": None, "seed": seed}
    (folder / CELL_FILE).write_text(json.dumps(cell))
    write_results(build_results({"front_end": "text"}, HeadRecord({"name": head}), {}, metrics, {}, {}), folder)


def test_report_gives_brights_plain_task_mean_apart_from_other_datasets(tmp_path):
    rng = np.random.default_rng(0)
    ndcg = {}
    for head in ("cosine", "qnorm"):
        for seed in (0, 1):
            tasks = dict(zip(BRIGHT_TASKS, rng.uniform(0.02, 0.3, size=12)))
            ndcg[head, seed] = tasks
            metrics = {"scifact": {"NDCG@10": 0.65, "MRR@10": 0.6, "Recall@100": 0.9}}
            for task, value in tasks.items():
                data = {"kind": "bright", "suite": "bright", "task": task}
                metrics[f"bright-{task}"] = {"NDCG@10": value, "Recall@1": value / 2, "Recall@100": 0.5, "data": data}
            _cell(tmp_path, head, seed, metrics)
    report = build_report(tmp_path, allow_mixed=True).read_text()
    with open(tmp_path / "table_bright.csv") as handle:
        means = {
            (r["config"], r["metric"]): float(r["mean"])
            for r in csv.DictReader(handle)
            if r["dataset"] == "bright mean (12 tasks)"
        }
    for head in ("cosine", "qnorm"):
        per_seed = [np.mean(list(ndcg[head, seed].values())) for seed in (0, 1)]
        assert means[head, "NDCG@10"] == pytest.approx(np.mean(per_seed), abs=1e-12)
        assert means[head, "Recall@1"] == pytest.approx(np.mean(per_seed) / 2, abs=1e-12)
    with open(tmp_path / "table_retrieval.csv") as handle:
        assert {r["dataset"] for r in csv.DictReader(handle)} == {"scifact"}  # group means no longer mix BRIGHT in
    assert "## BRIGHT: plain mean over its tasks" in report and "`paper` bright mean (12 tasks): best nDCG@10" in report
