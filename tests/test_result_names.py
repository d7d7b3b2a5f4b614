"""No result is lost to a name: two inputs that share a folder name keep a file (and a row) each.

Two sweeps' ``.../cosine/seed0/export`` and two folders named ``scifact`` evaluated in one call each
get their own JSON and TREC run, named by the parent folders that tell them apart; the RAG rows and
CLIP-benchmark's result files of two same-named models are kept apart the same way.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from clip_fixtures import write_digit_shards
from text_fixtures import REPO, write_beir, write_tiny_bert

from clipmag.storage.naming import distinct_labels
from text_retrieval.evaluation.bright_scores import bright_summary
from text_retrieval.evaluation.cli import main as eval_text
from text_retrieval.evaluation.metrics import read_trec_run

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()


def _beir(folder: Path, shift: int) -> Path:
    """A small BEIR set; ``shift`` picks other queries, so two sets score differently."""
    corpus = [{"_id": f"d{i}", "title": "", "text": f"{WORDS[i]} {WORDS[(i + 3) % 12]} text {i}"} for i in range(12)]
    queries = [{"_id": f"q{i}", "text": f"{WORDS[(i + shift) % 12]} {WORDS[(i * 5) % 12]}"} for i in range(6)]
    qrels = [(f"q{i}", f"d{(i + shift) % 12}", 1) for i in range(6)]
    return write_beir(folder, corpus, queries, qrels)


def _models(root: Path) -> list[Path]:
    """Two different tiny models, both at ``<sweep>/cosine/seed0/export``."""
    return [
        write_tiny_bert(root / sweep / "cosine" / "seed0" / "export", initializer_range=scale)
        for sweep, scale in (("x", 0.02), ("y", 0.5))
    ]


def test_labels_shared_by_different_inputs_get_the_parents_that_tell_them_apart(tmp_path):
    a, b = (tmp_path / s / "cosine" / "seed0" / "export" for s in "ab")
    assert distinct_labels(["cosine-seed0", "cosine-seed0", "other"], [str(a), str(b), "o"]) == [
        "a/cosine-seed0",
        "b/cosine-seed0",
        "other",
    ]
    assert distinct_labels(["contriever"] * 2, ["facebook/contriever", "me/contriever"]) == [
        "facebook/contriever",
        "me/contriever",
    ]
    same = str(tmp_path / "p" / "scifact")
    assert distinct_labels(["scifact"] * 3, [same, str(tmp_path / "q" / "scifact"), same]) == [
        "p/scifact",
        "q/scifact",
        "p/scifact#2",  # the same folder twice: numbered
    ]


def test_two_same_named_models_on_two_same_named_data_sets_keep_four_results(tmp_path, capsys):
    models = _models(tmp_path / "sweeps")
    data = [_beir(tmp_path / parent / "scifact", shift) for parent, shift in (("p", 0), ("q", 5))]
    out = tmp_path / "eval"
    args = ["--model", *map(str, models), "--data", *map(str, data), "--output", str(out), "--top-k", "5"]
    records = eval_text([*args, "--quiet", "--precision", "fp32", "--max-length", "16"])
    table = capsys.readouterr().out
    assert len(records) == 4 and len(list(out.glob("*.json"))) == 4 and len(list((out / "runs").glob("*.trec"))) == 4
    labels = {(r["model_label"], r["dataset_label"]) for r in records}
    assert labels == {(m, d) for m in ("x/cosine-seed0", "y/cosine-seed0") for d in ("p/scifact", "q/scifact")}
    for record in records:
        written = json.loads(Path(record["output_file"]).read_text())
        assert written["metrics"] == record["metrics"] and written["model"] == record["model"]
        assert Path(record["run_file"]).name == Path(record["output_file"]).with_suffix(".trec").name
        assert set(read_trec_run(record["run_file"])) == {f"q{i}" for i in range(6)}
        row = next(line for line in table.splitlines() if line.startswith(record["model_label"] + " "))
        assert record["dataset_label"] in table and row
    by_label = {(r["model_label"], r["dataset_label"]): r["metrics"]["NDCG@10"] for r in records}
    assert len(set(by_label.values())) > 1  # each file holds its own model's numbers on its own data
    assert (out / "x_cosine-seed0__p_scifact__cosine.json").is_file()


def test_bright_means_of_two_roots_are_two_lines():
    def record(root: str, task: str, score: float) -> dict:
        bright = {"suite": "bright", "task": task}
        config = {"bright": bright, "head": {"name": "dot"}, "data_source": f"/data/{root}/bright/{task}"}
        return {
            "model_label": "m",
            "config": config,
            "metrics": dict.fromkeys(("NDCG@10", "Recall@1", "Recall@100"), score),
        }

    summary = bright_summary([record("old", "pony", 0.2), record("old", "aops", 0.4), record("new", "pony", 0.9)])
    assert "old/bright: mean over 2 tasks  NDCG@10 0.3000" in summary
    assert "new/bright: mean over 1 tasks  NDCG@10 0.9000" in summary


def test_rag_rows_of_two_same_named_models_are_both_kept(tiny_rag_files, tmp_path):
    from text_retrieval.rag.config import RagConfig, RagDataConfig, ReaderConfig, RetrievalConfig
    from text_retrieval.rag.pipeline import run_rag

    models = [str(m) for m in _models(tmp_path / "sweeps")]
    data = RagDataConfig(corpus=str(tiny_rag_files[0]), qa=[str(tiny_rag_files[1])])
    retrieval = RetrievalConfig(models=models, max_length=32, cache_dir=None, depth=4)
    cfg = RagConfig(
        data=data, retrieval=retrieval, reader=ReaderConfig(name_or_path="none"), output=str(tmp_path / "rag")
    )
    rows = run_rag(cfg, show_progress=False)
    assert [row.label for row in rows] == ["x/cosine-seed0/cosine", "y/cosine-seed0/cosine"]
    for row in rows:
        record = json.loads((tmp_path / "rag" / row.label.replace("/", "_") / "results.json").read_text())
        assert record["retriever"]["model"] in models and record["metrics"] == row.metrics


def _clip_benchmark(*args: str) -> subprocess.CompletedProcess:
    script = REPO / "scripts" / "eval_clip_benchmark.py"
    return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_clip_benchmark_writes_one_file_per_same_named_checkpoint(tmp_path):
    import torch

    from clipmag.scoring.heads import build_head
    from clipmag.scoring.losses import InfoNCE
    from image_text.model.architecture import build_open_clip
    from image_text.model.clip_model import ClipMagModel
    from image_text.model.config import ClipModelConfig
    from image_text.model.export import export_open_clip

    exports = []
    for seed, sweep in enumerate("xy"):
        torch.manual_seed(seed)
        clip, _, _, _ = build_open_clip(ClipModelConfig(name="clipmag-micro"))
        model = ClipMagModel(
            clip, build_head("qnorm"), InfoNCE(scale=20.0, direction="q2d"), "image", "clipmag-micro"
        ).eval()
        exports.append(export_open_clip(model, tmp_path / sweep / "qnorm" / "seed0" / "export"))
    shards = write_digit_shards(tmp_path / "digits", 20, 10, 20, per_class=2, shard_size=20)
    args = ["eval", "--model_type", "clipmag", "--model", "micro", "--pretrained", *map(str, exports)]
    args += ["--dataset", "wds/digits_retrieval", "--dataset_root", f"{shards}/wds/{{dataset}}"]
    args += ["--task", "zeroshot_retrieval", "--num_workers", "0", "--no_amp", "--batch_size", "32"]
    # scored with the model's head (the default); several k, since two untrained models can tie at one
    # (tests/test_clip_benchmark_heads.py: test_a_one_side_head_ranks_the_side_it_normalises_as_cosine_does)
    args += ["--recall_k", "1", "5", "10"]
    one_file = _clip_benchmark(*args, "--output", str(tmp_path / "result.json"))
    assert one_file.returncode == 2 and "Traceback" not in one_file.stderr
    assert f"--pretrained {exports[0]} and {exports[1]} would overwrite each other" in one_file.stderr
    assert not (tmp_path / "result.json").exists()
    ran = _clip_benchmark(*args, "--output", str(tmp_path / "{dataset}_{pretrained}_{task}.json"))
    assert ran.returncode == 0, ran.stderr
    results = {p.name: json.loads(p.read_text()) for p in tmp_path.glob("*.json")}
    assert set(results) == {f"digits_retrieval_{s}_qnorm-seed0_zeroshot_retrieval.json" for s in "xy"}
    assert {r["pretrained"] for r in results.values()} == {str(e) for e in exports}
    assert {r["metrics"]["head"] for r in results.values()} == {"qnorm (query side image)"}
    assert len({json.dumps(r["metrics"], sort_keys=True) for r in results.values()}) == 2


@pytest.mark.parametrize("template", ["{dataset}_{pretrained}.json", "{dataset}_{pretrained_full_path}.json"])
def test_clip_benchmark_templates_name_a_checkpoint_file_as_clip_benchmark_does(tmp_path, template):
    from image_text.evaluation.benchmark import output_templates

    alone = tmp_path / "a" / "checkpoints" / "best.pt"
    alone.parent.mkdir(parents=True)
    alone.write_bytes(b"")
    expected = "best.pt" if "{pretrained}" in template else str(alone).replace("/", "_")
    assert output_templates([str(alone), "openai"], template) == [f"{{dataset}}_{expected}.json", template]
