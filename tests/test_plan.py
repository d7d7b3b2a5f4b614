"""The cost plan: FLOPs counted on the meta device equal those counted on the real model, and the
plan turns them into GPU-hours and memory per rank as it says."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml
from conftest import REPO, script_env
from torch.utils.flop_counter import FlopCounterMode

from clipmag.runtime.devices import device_named
from clipmag.train.cost import BYTES_PER_PARAMETER
from clipmag_experiments.cli import sweep_main
from clipmag_experiments.dry_run.standin_models import write_tiny_encoder
from clipmag_experiments.sweep.plan import plan_sweep
from clipmag_experiments.sweep.run import load_sweep_config
from text_retrieval import cost as text_cost
from text_retrieval.cli import cell_cost, parse_args
from text_retrieval.model.encoder import TextEncoder


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return write_tiny_encoder(tmp_path_factory.mktemp("tiny") / "encoder")


def _args(model, *extra):
    return [f"model.name={model}", "data.batch_size=4", "data.hard_negatives=1", "train.steps=10", *extra]


def test_meta_counts_equal_the_real_model(tiny):
    argv = _args(tiny, "model.query_max_length=16", "model.document_max_length=24")
    cost = cell_cost(argv, world_size=2)
    # eager attention: its matmuls are counted, as on the meta device (the CPU's fused attention is not)
    eager = {"attn_implementation": "eager"}
    encoder = TextEncoder.from_pretrained(
        tiny, query_max_length=16, document_max_length=24, precision="fp32", model_kwargs=eager
    )
    text = " ".join(["retrieval"] * 40)
    with FlopCounterMode(display=False) as counter:
        q = encoder.embed(encoder.tokenize([text] * 4, "query"))
        d = encoder.embed(encoder.tokenize([text] * 8, "document"))
        (q.sum() + d.sum()).backward()
    assert cost.flops_per_step == pytest.approx(2 * counter.get_total_flops())  # two ranks' micro-batches
    assert cost.parameters == sum(p.numel() for p in encoder.parameters())
    assert (cost.steps, cost.global_batch) == (10, 8)


def test_the_plan_prices_every_cell(tiny, tmp_path):
    spec = {
        "output_dir": str(tmp_path / "runs"),
        "launcher": "torchrun",
        "nproc_per_node": 2,
        "groups": [
            {"name": "tiny", "kind": "text", "heads": ["cosine", "dnorm"], "seeds": [0, 1], "args": _args(tiny)}
        ],
    }
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(spec))
    cfg = load_sweep_config(tmp_path / "sweep.yaml")
    table = plan_sweep(cfg, device_named("a100"), 0.5)
    rows = [line for line in table.splitlines() if line.startswith("tiny/")]
    assert len(rows) == 4 and all("| 2 | 10 | 8 |" in row for row in rows)
    cost = cell_cost(_args(tiny), world_size=2)
    hours = cost.steps * cost.flops_per_step / (312e12 * 0.5) / 3600
    assert f"total: {4 * hours:.1f} GPU-hours on a100" in table
    fsdp = BYTES_PER_PARAMETER * cost.parameters / 2 / 2**30
    assert all(row.endswith(f"{fsdp:.1f} GiB") for row in rows)
    assert parse_args(_args(tiny)).train.steps == 10


def test_repeated_forward_passes_are_counted(tiny):
    plain = cell_cost(_args(tiny), world_size=1).flops_per_step
    cached = cell_cost(_args(tiny, "train.chunk_size=2"), world_size=1).flops_per_step
    recomputed = cell_cost(_args(tiny, "train.gradient_checkpointing=true"), world_size=1).flops_per_step
    both = cell_cost(_args(tiny, "train.chunk_size=2", "train.gradient_checkpointing=true"), world_size=1)
    assert cached == recomputed > plain  # one more forward each
    assert both.flops_per_step == pytest.approx(plain + 2 * (cached - plain))


def test_one_text_per_side_is_counted_and_every_batch_head_rate_and_step_count_reads_it(tiny):
    short = "model.query_max_length=12"
    first = cell_cost(_args(tiny, "optim.lr=1e-3", short), world_size=1)
    counted = len(text_cost._TEXT_COUNTS)
    again = cell_cost(_args(tiny, "optim.lr=3e-5", "train.steps=40", short), world_size=1)
    assert (again.flops_per_step, again.parameters, again.steps) == (first.flops_per_step, first.parameters, 40)
    doubled = cell_cost(_args(tiny, short, "data.batch_size=8"), world_size=1)
    assert doubled.flops_per_step == 2 * first.flops_per_step  # every op acts on each text alone
    learnable = cell_cost(_args(tiny, "--norm", "learnable", short), world_size=1)
    assert len(text_cost._TEXT_COUNTS) == counted  # nothing counted again
    built = TextEncoder.from_pretrained(tiny, norm="learnable", precision="fp32")
    assert learnable.parameters == first.parameters + 2 == sum(p.numel() for p in built.parameters())
    assert cell_cost(_args(tiny, "model.query_max_length=20"), world_size=1).flops_per_step > first.flops_per_step


def test_plan_on_the_command_line(tiny, tmp_path, capsys):
    spec = {
        "output_dir": str(tmp_path / "runs"),
        "groups": [{"name": "g", "kind": "text", "heads": ["qnorm"], "args": _args(tiny)}],
    }
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(spec))
    sweep_main(["plan", "--config", str(tmp_path / "sweep.yaml"), "--device", "h100", "--utilisation", "0.3"])
    out = capsys.readouterr().out
    assert "cost plan on h100" in out and "g/qnorm/seed0 | 1 | 10 | 4 |" in out
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        sweep_main(["plan", "--config", str(tmp_path / "sweep.yaml"), "--device", "tpu"])


@pytest.mark.slow
def test_the_paper_grid_is_priced_from_the_published_sizes(tmp_path):
    """Offline, the paper models' configs at their published sizes in a hub cache: BERT-base's 109M
    parameters, Qwen3-8B's 7.6B without its language-model head, which only FSDP fits on an H100."""
    cache = tmp_path / "hub"
    subprocess.run([sys.executable, "-m", "clipmag_experiments.dry_run.standin_sizes", str(cache)], check=True)
    env = {**script_env(), "HF_HUB_CACHE": str(cache)}
    paper_text = ["--config", "configs/sweeps/paper_text.yaml", "--only", "contriever", "qwen3"]
    command = [sys.executable, str(REPO / "scripts" / "sweep.py"), "plan", *paper_text]
    out = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, check=True).stdout
    rows = {line.split(" | ")[0]: line.split(" | ") for line in out.splitlines() if "/seed" in line}
    assert len(rows) == 30  # 2 models x 5 heads x 3 seeds
    assert rows["contriever/cosine/seed0"][4] == "109.5M"
    assert rows["qwen3/dnorm/seed42"][4].startswith("7568.")
    ddp, fsdp = (float(rows["qwen3/dnorm/seed42"][i].removesuffix(" GiB")) for i in (7, 8))
    assert ddp > 80 > fsdp == pytest.approx(ddp / 2, abs=0.1)
    assert "total:" in out


def test_the_clip_count_builds_nothing_real():
    """open_clip moves a model to its device argument; the count names the meta device to it."""
    import open_clip

    from image_text.cli import cell_cost as clip_cell_cost

    plain = clip_cell_cost(["model.name=clipmag-micro", "train.steps=2"], world_size=1)
    recomputed = clip_cell_cost(["model.name=clipmag-micro", "train.gradient_checkpointing=true"], world_size=1)
    real = open_clip.create_model("clipmag-micro")
    assert plain.parameters == sum(p.numel() for p in real.parameters())
    assert recomputed.flops_per_step > plain.flops_per_step > 0


def test_continued_cells_are_priced_for_the_steps_they_add_and_cpu_hours_follow_the_stated_rates(tiny, tmp_path):
    spec = {
        "output_dir": str(tmp_path / "runs"),
        "plan": {"cpu_pairs_per_second": {"small": 0.01}, "stand_ins": {"small": str(tiny)}},
        "groups": [
            {"name": "short", "kind": "text", "models": [f"small={tmp_path / 'not-built-yet'}"], "heads": ["cosine"],
             "args": _args(tiny)},
            {"name": "long", "kind": "text", "models": [f"small={tmp_path / 'not-built-yet'}"], "heads": ["cosine"],
             "args": [*_args(tiny), "train.steps=25"], "continue_from": "short"},
        ],
    }  # fmt: skip
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(spec))
    table = plan_sweep(load_sweep_config(tmp_path / "sweep.yaml"), device_named("a100"), 0.5)
    rows = {line.split(" | ")[0]: line for line in table.splitlines() if "/small/" in line}
    assert "| 1 | 10 | 4 |" in rows["short/small/cosine/seed0"]
    assert "| 1 | 15 | 4 |" in rows["long/small/cosine/seed0"]  # 25 steps, 10 of them the short cell's
    assert "short | 40 | 1.11" in table and "long | 60 | 1.67" in table  # pairs / 0.01 per second / 3600
    assert "total: 2.78 CPU-hours (100 pairs)" in table


def test_the_budget_sweep_meets_its_design():
    """configs/sweeps/budget.yaml: three budgets per task spanning 20x or more, the largest 10 epochs of
    SciFact's 919 pairs and 5 of code search's 2,500, 64 rows a step, seeds 0-2, a constant schedule
    for its continued budgets, settings chosen on dev, the compared groups exactly the budgets."""
    cfg = load_sweep_config(REPO / "configs" / "sweeps" / "budget.yaml")
    budgets = {g.name: g for g in cfg.groups if g.name.startswith(("code-search-", "scifact-"))}
    assert cfg.comparison.groups == list(budgets)
    for task, pairs in (("code-search-", 2500), ("scifact-", 919)):
        chain = [g for name, g in budgets.items() if name.startswith(task)]
        resolved = [parse_args([*g.args, *cfg.args]) for g in chain]
        seen = [r.train.steps * r.data.batch_size for r in resolved]
        assert [int(g.name.removeprefix(task)) for g in chain] == seen and len(seen) >= 3
        assert seen[-1] / seen[0] >= 20 and seen[-1] >= (10 if task == "scifact-" else 5) * pairs
        assert all(r.data.batch_size >= 64 and r.optim.schedule == "constant" for r in resolved)
        assert [g.continue_from for g in chain] == [None, *(g.name for g in chain[:-1])]
        assert all(g.seeds == [0, 1, 2] and {"cosine", "qnorm", "dnorm"} <= set(g.heads) for g in chain)
        assert all(g.choose_variant and g.choose_variant.group == "scale-grid" for g in chain)
    grid = next(g for g in cfg.groups if g.name == "scale-grid")
    assert grid.choose_variant.group == "lr-grid" and grid.choose_variant.head == "cosine"
    for selection in ("lr-grid", "scale-grid"):
        assert "data.test_split=dev" in next(g for g in cfg.groups if g.name == selection).args
    assert set(cfg.plan.cpu_pairs_per_second) == {"splade", "minilm-dot"}
