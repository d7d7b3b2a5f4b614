"""The paper dry run: stand-ins in the published layouts pass through the real builders, tiny models
load as the paper configs use their hub models, the plan changes the paper sweeps only through a
sweep's overrides and covers every paper config, and (slow) the STS part runs end to end."""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import pytest
from conftest import REPO, script_env

from clipmag.config.build import load_yaml
from clipmag.runtime.logs import caller_logging_kept, logger, setup_logging
from clipmag_experiments.design.expansion import expand
from clipmag_experiments.design.prepare import SweepStep, run_prepare
from clipmag_experiments.dry_run.plan import PARTS, RAG_CONFIGS, SHORT_ARGS, coverage, coverage_table, plan
from clipmag_experiments.dry_run.standin_coco import KARPATHY_COUNTS, write_karpathy_coco
from clipmag_experiments.dry_run.standin_test_sets import write_beir, write_bright_hub, write_dpr
from clipmag_experiments.dry_run.standin_training_sets import write_msmarco_v11, write_nli_archives
from clipmag_experiments.sweep.run import check_cells
from image_text.data import shards_cli
from text_retrieval.data import download
from text_retrieval.data.loaders import detect_kind, load_beir, load_eval_datasets, load_sts
from text_retrieval.data.loaders.bright import BRIGHT_TASKS, load_bright_collection
from text_retrieval.data.training.shards import TextShardStream
from text_retrieval.rag.answers import has_answer
from text_retrieval.rag.data import read_corpus, read_qa


def test_training_standins_pass_through_the_real_builders(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_msmarco_v11("raw/ms_marco", train_queries=100, validation_queries=30)
    sizes = ["--dev-queries", "5", "--dev-corpus", "40", "--samples-per-shard", "10"]
    download.main(["msmarco", "data/msmarco80k", "--source", "raw/ms_marco", *sizes])
    manifest = json.loads((tmp_path / "data/msmarco80k/manifest.json").read_text())
    assert manifest["counts"] == {"rows": 100, "pairs": 90, "no_selected_passage": 10}  # one row in ten has none
    assert TextShardStream(tmp_path / "data/msmarco80k/shards", batch_size=4).num_samples == 90
    assert len(load_beir(tmp_path / "data/msmarco80k/dev", split="dev").queries) == 5
    write_nli_archives("raw/nli", pairs=40)
    download.main(["allnli", "data/sts", "--source", "raw/nli"])
    counts = json.loads((tmp_path / "data/sts/train.manifest.json").read_text())["counts"]
    assert counts["snli"]["no_gold_label"] == 10 and counts["snli"]["written"] == 30  # SNLI's '-' pairs left out
    assert counts["mnli"]["written"] == 40 and counts["stsb"]["written"] == 20
    download.main(["sts", "stsbenchmark", "data/sts", "--source", "raw/nli/Stsbenchmark.tar.gz"])
    (test,) = load_sts(tmp_path / "data/sts/stsbenchmark")
    assert len(test) == 60 and test.gold_scale.hi == 5.0


def test_test_set_standins_load_as_the_real_sets(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    arguana = load_beir(write_beir("data/beir/arguana"), split="test")
    assert set(arguana.queries) <= set(arguana.corpus_ids)  # ArguAna's queries are corpus documents too
    write_bright_hub("raw/bright")
    download.main(["bright", "data/bright", "--snapshot", "raw/bright"])
    download.main(["bright", "data/bright", "--snapshot", "raw/bright", "--long-documents"])
    tasks = {ds.task: ds for ds in load_bright_collection(tmp_path / "data/bright")}
    assert sorted(tasks) == sorted(BRIGHT_TASKS) and tasks["leetcode"].excluded
    assert len(load_bright_collection(tmp_path / "data/bright", long_documents=True)) == 8
    write_dpr("data", passages=40, questions=6)
    corpus = read_corpus("data/dpr/psgs_w100.tsv")
    texts = [p.text for p in corpus.passages]
    for path in ("data/dpr/nq.test.txt", "data/dpr/trivia.test.txt", "data/hotpotqa/hotpot_dev_fullwiki_v1.json"):
        questions = read_qa(path).questions
        assert len(questions) == 6 and all(any(has_answer(q.answers, t) for t in texts) for q in questions)
    split_file = write_karpathy_coco("data/raw/coco", counts={"train": 6, "restval": 2, "val": 2, "test": 3})
    shards_cli.main(["--output", "data/coco", "--images", "data/raw/coco", "--karpathy", str(split_file)])
    split = json.loads((tmp_path / "data/coco/splits.json").read_text())["counts"]
    assert split == {s: {"images": n, "captions": 5 * n} for s, n in {"train": 8, "val": 2, "test": 3}.items()}
    assert set(KARPATHY_COUNTS) == {"train", "restval", "val", "test"}


def test_tiny_models_load_as_the_configs_use_their_hub_models(tmp_path):
    import numpy as np

    from clipmag_experiments.dry_run.standin_models import write_tiny_decoder, write_tiny_encoder, write_tiny_reader
    from text_retrieval.model.encoder import TextEncoder
    from text_retrieval.rag.reader import load_reader

    texts = ["what is the copper canyon", "a meadow of tulips near the harbor and its willow"]
    cls = TextEncoder.from_pretrained(write_tiny_encoder(tmp_path / "bert"), pooling="cls")
    norms = np.linalg.norm(cls.encode(texts, "document", show_progress=False), axis=1)
    assert abs(norms[0] - norms[1]) > 1e-2 * norms[0]  # drawn away from BERT's init: CLS norms vary
    decoder = TextEncoder.from_pretrained(write_tiny_decoder(tmp_path / "mistral"))
    assert decoder.pooling == "last"  # from its sentence-transformers files, as e5-mistral's
    assert decoder.tokenizer("a")["input_ids"][-1] == decoder.tokenizer.eos_token_id  # appended for last pooling
    qwen3 = TextEncoder.from_pretrained(write_tiny_decoder(tmp_path / "qwen3", family="qwen3"), pooling="last")
    assert type(qwen3.model).__name__ == "Qwen3Model" and qwen3.tokenizer.eos_token == "<|endoftext|>"
    reader = load_reader(str(write_tiny_reader(tmp_path / "t5")), max_input_tokens=1024, dtype="float32")
    assert reader.seq2seq and reader.max_input_tokens == 1024
    assert len(reader.generate_texts(["question: what? context: a tulip"])) == 1


def test_plan_overrides_the_paper_sweeps_and_covers_every_paper_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    sweeps = plan(PARTS)
    cells = [c for s in sweeps for c in expand(s.cfg)]
    for sweep in sweeps:
        assert sweep.cfg.launcher == "torchrun" and sweep.cfg.nproc_per_node == 2
        assert sweep.cfg.args == SHORT_ARGS[sweep.cfg.groups[0].kind]
        check_cells(expand(sweep.cfg), sweep.path)  # every cell parses with the paper configs and stand-ins
    assert len(cells) == 10 and {c.seed for c in cells} == {0}
    assert len([c for s in plan(PARTS, full=True) for c in expand(s.cfg)]) == 20 + 4 + 6  # every head, one seed
    text = {c.group: c for c in cells if c.kind == "text"}
    assert "model.name=models/Shitao/RetroMAE" in text["retromae"].argv
    assert "model.name=models/Qwen/Qwen3-8B-Base" in text["qwen3"].argv  # trained under FSDP by its config
    assert "model.name=clipmag-tiny" in next(c for c in cells if c.kind == "clip").argv
    sts = next(c for c in cells if c.group == "sts-contriever")
    assert sts.argv[sts.argv.index("--model") + 1] == "models/facebook/contriever"
    assert sts.directory.parts[-3] == "contriever"  # the label, so the run folder, is the paper's
    trained = {str(c.directory / "export") for c in cells}
    for config in RAG_CONFIGS:  # the exports the RAG configs read are ones the dry run trains
        assert set(load_yaml(config)["retrieval"]["models"]) <= trained
    assert all(len(c.evaluations) == (3 if c.group == "contriever" else 0) for c in cells)
    table = coverage_table(coverage(sweeps, PARTS), PARTS)
    assert "not covered" not in table and "`configs/eval/bright_official.yaml` | data.test of" in table
    assert "`configs/sweeps/paper_clip.yaml` | **not covered**" in coverage_table(coverage([], ["sts"]), ["sts"])


def test_trainer_names_a_missing_test_set_before_its_first_step(tmp_path, monkeypatch):
    from clipmag_experiments.dry_run.standin_models import write_tiny_encoder
    from text_retrieval.cli import main as train_main

    monkeypatch.chdir(tmp_path)
    write_msmarco_v11("raw", train_queries=40, validation_queries=20)
    download.main(["msmarco", "data/m", "--source", "raw", "--dev-queries", "4", "--dev-corpus", "30"])
    write_bright_hub("raw/bright", examples=2, pages=3)
    download.main(["bright", "data/bright", "--snapshot", "raw/bright", "--tasks", "pony"])
    assert detect_kind("configs/eval/bright_official.yaml") == "bright-settings"  # packaged, from any folder
    assert [d.task for d in load_eval_datasets("configs/eval/bright_official.yaml")] == ["pony"]
    args = [f"model.name={write_tiny_encoder(tmp_path / 'bert')}", "data.train=data/m/shards"]
    args += ["data.validation=[data/m/dev]", "data.test=[configs/eval/bright_official.yaml,data/beir/nowhere]"]
    with pytest.raises(FileNotFoundError, match=r"data\.test 'data/beir/nowhere': evaluation data not found"):
        train_main([*args, "train.device=cpu", "train.output_dir=run", "train.steps=2"])
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_a_step_run_in_process_gives_the_caller_its_logging_back(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_nli_archives("raw", pairs=8)
    setup_logging(tmp_path)
    with caller_logging_kept():
        setup_logging(level=logging.WARNING)  # what a --quiet evaluation's main does
    args = ["sts", "stsbenchmark", "data/sts", "--source", "raw/Stsbenchmark.tar.gz"]
    run_prepare([SweepStep("sts", "text_retrieval.data.download", args)])  # its main sets up logging too
    logger.info("after the step")
    assert logger.level == logging.INFO and "after the step" in (tmp_path / "out.log").read_text()


@pytest.mark.slow
def test_dry_run_of_the_sts_sweep_ends_in_the_report(tmp_path):
    run = subprocess.run(
        [sys.executable, str(REPO / "scripts/paper_dry_run.py"), "--only", "sts", "--root", str(tmp_path)],
        cwd=REPO,
        env=script_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    report = (tmp_path / "runs/paper/report.md").read_text()
    table = report.split("## Symmetric task (STS-style)")[1].split("##")[0]
    assert "| group | model | dataset | metric | cosine | qnorm |" in table and "stsbenchmark-test" in table
    assert "| sts-contriever | facebook/contriever | stsbenchmark-test | spearman |" in table
    coverage_md = (tmp_path / "coverage.md").read_text()
    assert "`configs/sweeps/paper_sts.yaml` | swept: sts-contriever (cosine, qnorm; seed 0)" in coverage_md
    assert "`configs/text/paper_sts.yaml` | config of group sts-contriever" in coverage_md
    results = json.loads((tmp_path / "runs/paper/sts/sts-contriever/contriever/qnorm/seed0/results.json").read_text())
    assert results["run"]["world_size"] == 2 and results["run"]["steps"] == 2
