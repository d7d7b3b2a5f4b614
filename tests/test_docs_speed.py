"""The speed tables of CLIP training, corpus encoding and gradient caching are rendered from the JSON
records their benchmarks write with ``--output``: each benchmark is run here at its smallest sizes,
and each table must hold the rates it was given and name the CPU, threads and code state."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import pytest
from conftest import REPO, run_python

from clipmag.errors import ConfigError
from clipmag.results.provenance import describe_code
from clipmag_experiments.manuals.speed import BLOCKS
from clipmag_experiments.manuals.sync import render_text
from clipmag_experiments.report.stored import StoredResults

BENCHMARKS = REPO / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))

import harness  # noqa: E402

# block name -> the record it reads under results/speed
NEW_BLOCKS = {"speed-train-clip": "train_clip.json", "speed-encode": "encode.json", "speed-chunked": "chunked.json"}


def _smoke_runs(root: Path, corpus: Path) -> None:
    """Each benchmark at its smallest sizes, one thread, writing its record into ``root/speed``."""
    speed = root / "speed"
    common = ["--threads", "1", "--rounds", "1"]
    run_python(
        BENCHMARKS / "bench_train_clip.py",
        [*common, "--steps", "4", "--batch-size", "8", "--samples", "32", "--log-every", "1"]
        + ["--output", str(speed / "train_clip.json")],
    )
    run_python(
        BENCHMARKS / "bench_encode.py",
        [*common, "--data", str(corpus), "--n-docs", "4", "--batch-size", "4", "--max-length", "16"]
        + ["--output", str(speed / "encode.json")],
    )
    run_python(
        BENCHMARKS / "bench_chunked.py",
        ["--threads", "1", "--batch-size", "4", "--chunks", "2", "--steps", "1", "--rounds", "2", "--max-length", "16"]
        + ["--output", str(speed / "chunked.json")],
    )


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> Path:
    """A results root holding the three records of real (tiny) benchmark runs."""
    work = tmp_path_factory.mktemp("speed")
    corpus = work / "corpus.jsonl"
    docs = [
        {"_id": str(i), "title": f"doc {i}", "text": "contrastive learning of embeddings " * (i + 1)} for i in range(4)
    ]
    corpus.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    _smoke_runs(work / "results", corpus)
    return work / "results"


def _record(root: Path, block: str) -> dict:
    return json.loads((root / "speed" / NEW_BLOCKS[block]).read_text(encoding="utf-8"))


def _median_range(values: list[float], digits: int) -> str:
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


@pytest.mark.slow
@pytest.mark.parametrize("block", NEW_BLOCKS)
def test_each_table_holds_its_records_rates_and_where_they_were_measured(measured, block):
    record = _record(measured, block)
    table = BLOCKS[block](StoredResults(measured))
    assert table.endswith(
        f"Measured on {record['cpu']}, {record['threads']} threads, at {describe_code(record['code'])}."
    )
    assert record["threads"] == 1 and "output" not in record["settings"]
    assert record["code"]["commit"]
    if block == "speed-chunked":
        ours, theirs = record["chunks"]["2"]["ours"], record["chunks"]["2"]["theirs"]
        ratios = record["ratios"]["2"]
        assert len(ours["samples_per_s"]) == len(theirs["samples_per_s"]) == 2  # one figure a side and round
        assert (
            f"| 2 | {_median_range(ours['samples_per_s'], 2)} | {_median_range(theirs['samples_per_s'], 2)} | "
            f"{_median_range(ratios['samples_per_s ours/ST'], 2)} |"
        ) in table
        assert ratios["samples_per_s ours/ST"] == [
            a / b for a, b in zip(ours["samples_per_s"], theirs["samples_per_s"])
        ]
        return
    rates = record["docs_per_s" if block == "speed-encode" else "samples_per_s"]
    assert "clipmag fp32" in rates and len(rates["clipmag fp32"]) == 1  # one round: one figure a side
    for side, values in rates.items():
        assert f"| {side} | {_median_range(values, 1)} |" in table
    assert any(name.startswith("fp32: clipmag / ") for name in record["ratios"])
    for name, values in record["ratios"].items():
        assert f"| {name} | {_median_range(values, 2)} |" in table
    for side, rate in record["flop_rates"].items():
        assert f"| {side} | {rate['achieved_gflops']:.0f} | {rate['of_gemm']:.0%} |" in table


@pytest.mark.parametrize("block", NEW_BLOCKS)
def test_a_table_without_its_record_is_one_clear_error(tmp_path, block):
    manual = f"# Speed\n\n<!-- results:{block} -->\n<!-- /results:{block} -->\n"
    with pytest.raises(ConfigError, match=rf"manual.md:3: results:{block} cannot be rendered from .*FileNotFoundError"):
        render_text(manual, "manual.md", StoredResults(tmp_path))


def test_a_record_names_the_machine_settings_and_code_beside_the_figures(tmp_path):
    """The one writer every benchmark uses: the keys the stored train_text.json has, the settings
    without the output file and the machine-specific paths left out."""
    args = argparse.Namespace(steps=3, threads=2, model="/somewhere/model", output=tmp_path / "x.json")
    harness.write_record(args.output, "bench_x", args, {"samples_per_s": {"a": [1.0]}}, leave_out=("model",))
    record = json.loads(args.output.read_text(encoding="utf-8"))
    assert list(record) == ["benchmark", "cpu", "cpu_bf16", "threads", "settings", "code", "samples_per_s"]
    assert record["settings"] == {"steps": 3, "threads": 2} and record["threads"] == 2
    assert record["cpu"] == harness.cpu_name() and record["cpu_bf16"] == harness.bf16_units()
    assert record["code"]["commit"]


def test_the_suite_times_are_the_records_wall_clocks(tmp_path):
    speed = tmp_path / "speed"
    speed.mkdir()
    older = {
        "wall_seconds": {"test": 598.2, "test-slow": 1314.9},
        "code": {"commit": "ad6773b" + "0" * 33, "dirty": False},
        "cpu": "AMD EPYC",
        "cores": 2,
    }
    avx2 = {
        "wall_seconds": {"test": 900.0},
        "code": {"commit": "1234567" + "0" * 33, "dirty": False},
        "cpu": "AMD EPYC",
        "cpu_bf16": [],
        "cores": 2,
    }
    (speed / "tests.json").write_text(json.dumps({"runs": [older, avx2]}), encoding="utf-8")
    text = (
        "took <!-- value:suite-minutes:test -->?<!-- /value --> "
        "and <!-- value:suite-minutes:test-slow -->?<!-- /value -->"
    )
    rendered = render_text(text, "README.md", StoredResults(tmp_path))
    both = "10.0 minutes at commit `ad6773b` on AMD EPYC, 2 cores; 15.0 minutes at commit `1234567` on AMD EPYC"
    assert both + " (no bf16 units), 2 cores<" in rendered
    assert ">21.9 minutes at commit `ad6773b` on AMD EPYC, 2 cores<" in rendered  # make test-slow: one class


def _write(root: Path, name: str, record: dict) -> None:
    (root / "speed").mkdir(parents=True, exist_ok=True)
    (root / "speed" / name).write_text(json.dumps(record), encoding="utf-8")


def test_the_compile_table_holds_each_workloads_figures_and_says_whether_the_cache_was_cold(tmp_path):
    workload = {
        "compile_s": 41.2,
        "max_abs_diff": 3.3e-3,
        "largest": 1.1,
        "seconds": {"eager": [0.2, 0.22, 0.21], "compiled": [0.1, 0.2, 0.15]},
        "speedup": [2.0, 1.1, 1.4],
    }
    record = {
        "cpu": "AMD EPYC",
        "threads": 2,
        "settings": {"rounds": 3},
        "code": {"commit": "ad6773b" + "0" * 33, "dirty": False},
        "precision": "bf16",
        "cache_files_at_start": 0,
        "workloads": {"encode one 32 x 128-token batch": workload},
    }
    _write(tmp_path, "compile.json", record)
    table = BLOCKS["speed-compile"](StoredResults(tmp_path))
    assert (
        "| encode one 32 x 128-token batch | 41 | 0.210 (0.200-0.220) | 0.150 (0.100-0.200) | 1.40 (1.10-2.00) "
        "| 3.3e-03 (1.1e+00) |"
    ) in table
    assert "inductor's on-disk cache empty at the start" in table and "Measured on AMD EPYC, 2 threads" in table
    _write(tmp_path, "compile.json", {**record, "cache_files_at_start": 12})
    assert "12 files in inductor's cache at the start" in BLOCKS["speed-compile"](StoredResults(tmp_path / ""))


def test_the_bf16_gain_is_the_median_of_our_per_round_bf16_over_fp32_ratios(tmp_path):
    _write(tmp_path, "encode.json", {"docs_per_s": {"clipmag fp32": [10.0, 20.0, 10.0], "clipmag bf16": [30, 20, 15]}})
    _write(tmp_path, "train_clip.json", {"samples_per_s": {"clipmag fp32": [100.0], "clipmag bf16": [72.0]}})
    text = "<!-- value:bf16-gain:encode -->?<!-- /value --> <!-- value:bf16-gain:train_clip -->?<!-- /value -->"
    rendered = render_text(text, "precision.md", StoredResults(tmp_path))
    assert "-->1.50x<!--" in rendered and "-->0.72x<!--" in rendered


def test_the_search_table_holds_every_cases_seconds_ratios_memory_and_agreement(tmp_path):
    case = {
        "case": "memory-mapped",
        "queries": 100,
        "docs": 1_000_000,
        "dim": 384,
        "k": 10,
        "seconds": {"ours": [1.0, 1.2, 1.1], "blocked torch": [2.0, 2.2, 2.1]},
        "peak_mb": {"ours": 1280.4, "blocked torch": 3020.0},
        "identical_top10": 1.0,
        "ratios": {"ours / blocked torch": [2.0, 1.8, 1.9]},
    }
    record = {
        "cpu": "AMD EPYC",
        "threads": 2,
        "settings": {"rounds": 3, "memory_gb": 0.5},
        "code": {"commit": "ad6773b" + "0" * 33, "dirty": False},
        "cases": [case],
    }
    _write(tmp_path, "search.json", record)
    table = BLOCKS["speed-search"](StoredResults(tmp_path))
    assert (
        "| case | top-k | ours s | blocked torch s | ours / blocked torch | peak MB (ours / blocked torch) |" in table
    )
    assert (
        "| memory-mapped, 100 x 1,000,000 x 384 | 10 | 1.10 (1.00-1.20) | 2.10 (2.00-2.20) | 1.90 (1.80-2.00) "
        "| 1280 / 3020 | 100% |"
    ) in table
    assert "under memory_gb=0.5" in table and table.endswith("at commit ad6773b00000.")


def test_the_rag_table_holds_each_sides_rate_the_ratio_and_the_reader(tmp_path):
    record = {
        "cpu": "AMD EPYC",
        "threads": 2,
        "settings": {"questions": 16, "max_new_tokens": 16, "rounds": 2},
        "code": {"commit": "ad6773b" + "0" * 33, "dirty": False},
        "reader": "smollm2|model.gguf|torch.bfloat16|new=16",
        "prompt_tokens": [717, 969],
        "questions_per_s": {"ours": [0.8, 0.9], "pipeline": [0.6, 0.62]},
        "ratios": {"ours / transformers pipeline": [1.33, 1.45]},
        "identical_answers": [16, 16],
    }
    _write(tmp_path, "rag.json", record)
    table = BLOCKS["speed-rag"](StoredResults(tmp_path))
    assert "| ours | 0.850 (0.800-0.900) |" in table and "| pipeline | 0.610 (0.600-0.620) |" in table
    assert "| ours / transformers pipeline | 1.39 (1.33-1.45) |" in table
    assert "16 prompts of 717-969 tokens" in table and "identical first-line answers 16/16" in table


@pytest.mark.slow
def test_search_and_rag_benchmarks_write_the_records_their_tables_render(tmp_path):
    """Both benchmarks at their smallest sizes, one thread: each record renders, naming the CPU."""
    speed = tmp_path / "speed"
    run_python(
        BENCHMARKS / "bench_search.py",
        ["--threads", "1", "--rounds", "1", "--docs", "1200", "--queries", "20", "--skip-large"]
        + ["--output", str(speed / "search.json")],
    )
    run_python(
        BENCHMARKS / "bench_rag.py",
        ["--threads", "1", "--rounds", "1", "--questions", "2", "--max-new-tokens", "2"]
        + ["--root", str(tmp_path / "rag-bundled"), "--output", str(speed / "rag.json")],
    )
    stored = StoredResults(tmp_path)
    search = json.loads((speed / "search.json").read_text(encoding="utf-8"))
    assert [(case["case"], case["k"]) for case in search["cases"]] == [("in memory", 10), ("in memory", 1000)]
    assert search["cases"][0]["identical_top10"] == 1.0  # exact search: every side finds the same documents
    assert "| in memory, 20 x 1,200 x 384 | 10 |" in BLOCKS["speed-search"](stored)
    rag = json.loads((speed / "rag.json").read_text(encoding="utf-8"))
    assert rag["settings"]["questions"] == 2 and len(rag["ratios"]["ours / transformers pipeline"]) == 1
    for table in (BLOCKS["speed-search"](stored), BLOCKS["speed-rag"](stored)):
        assert "Measured on " in table and ", 1 threads, at " in table
