"""Where a training step's time goes: ``torch.profiler`` on the trainers' real steps, grouped by kind.

The real loop (``clipmag.train.engine.Trainer``) runs each configuration; the profiler records a
few steps after a warm-up, stepping its schedule each time the loop draws a batch. Every recorded
operator's *self* time (time not spent in an operator it called) goes to one kind:

* ``gemm``: matmuls (mm, addmm, bmm, linear's kernels), the model's arithmetic proper;
* ``attention``: softmax, SDPA and the masking around them;
* ``norm+act``: layer norms, GELU and other activations, dropout;
* ``elementwise``: adds, multiplies and other pointwise or reduction kernels;
* ``casts+copies``: dtype casts and copies (``to``, ``_to_copy``, ``copy_``, contiguous);
* ``optimizer+clip``: anything under ``Optimizer.step`` and the gradient clipping norms;
* ``embedding grad``: the dense gradient of the token embedding matrix;
* ``autograd``: the autograd engine's own bookkeeping between backward kernels;
* ``tokenise+data``: tokenization and padding (recorded under a ``tokenize`` range) and batch reads;
* ``python+other``: the step's wall time that no operator accounts for (the interpreter, the
  loop, logging and the profiler's own cost).

The table gives each kind's share of the profiled step and its milliseconds per step, beside the
unprofiled step time of the same configuration (the profiler slows small operators down, so the
shares matter more than the absolute milliseconds). JSON with every figure goes to ``--output``.

    python benchmarks/profile_step.py                  # the text grid and the CLIP step
    python benchmarks/profile_step.py --quick          # one small text configuration (a smoke run)
    python benchmarks/profile_step.py --sweeps         # the sweeps' steps: SPLADE-tiny, MiniLM-L6, the CLIP towers

``--sweeps`` profiles the steps the sweeps spend their CPU-hours in, at their batch of 64 and
lengths 32/64, in bf16 where the CPU computes it natively (else fp32): SPLADE-tiny with its
vocabulary head (``splade`` pooling: the masked-language-model logits max-pooled per term),
all-MiniLM-L6-v2, and the CLIP towers of the image-text sweeps (``--clip-model``). Its record,
``results/speed/profile_sweeps.json``, also counts each kind's operator calls per step, which no
load on the machine changes: the calls, not the milliseconds, say how many casts a step makes.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from harness import ROOT, code_at_start, cpu_name, default_model, default_precision
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from clipmag.config.build import build_config
from clipmag.runtime.distributed import init_distributed
from clipmag.runtime.machine import bf16_units
from clipmag.train.engine import Trainer
from clipmag_experiments.manuals.speed import KINDS as ORDER

KINDS = (
    ("embedding grad", r"embedding_dense_backward|embedding_backward|index_put|_index_put_impl|index_add"),
    ("gemm", r"aten::(mm|addmm|bmm|baddbmm|_addmm_activation|linear|matmul)$|mkldnn.*(linear|matmul)"),
    ("attention", r"softmax|scaled_dot_product|_flash_attention|_efficient_attention|masked_fill|where"),
    ("norm+act", r"layer_norm|gelu|silu|relu|tanh|dropout|native_dropout|erf|rms_norm"),
    ("casts+copies", r"aten::(to|_to_copy|copy_|clone|contiguous|empty_like|empty_strided|empty)$"),
)
OPTIMIZER_RANGES = re.compile(r"Optimizer\.step|clip_grad|_foreach_norm|linalg_vector_norm|zero_grad")
DATA_RANGES = ("tokenize", "data")


def kind_of(name: str, ranges: tuple[str, ...]) -> str:
    """The kind of an operator named ``name`` whose enclosing user ranges are ``ranges``."""
    if any(OPTIMIZER_RANGES.search(r) for r in ranges) or OPTIMIZER_RANGES.search(name):
        return "optimizer+clip"
    if name in DATA_RANGES or any(r in DATA_RANGES for r in ranges):
        return "tokenise+data"
    if name.startswith("autograd::engine") or name.startswith("torch::autograd"):
        return "autograd"
    for kind, pattern in KINDS:
        if re.search(pattern, name):
            return kind
    return "elementwise"


def group_events(events: Any) -> tuple[dict[str, float], dict[str, dict[str, float]], dict[str, int]]:
    """Self CPU microseconds per kind, per operator within each kind, and operator calls per kind,
    walking each event's parents for the user ranges it sits in."""
    totals: dict[str, float] = {}
    by_op: dict[str, dict[str, float]] = {}
    calls: dict[str, int] = {}
    for event in events:
        if event.device_type != torch.autograd.DeviceType.CPU:
            continue
        ranges, parent = [], event.cpu_parent
        while parent is not None:
            ranges.append(parent.name)
            parent = parent.cpu_parent
        kind = "python+other" if event.name.startswith("ProfilerStep") else kind_of(event.name, tuple(ranges))
        totals[kind] = totals.get(kind, 0.0) + event.self_cpu_time_total
        calls[kind] = calls.get(kind, 0) + 1
        ops = by_op.setdefault(kind, {})
        ops[event.name] = ops.get(event.name, 0.0) + event.self_cpu_time_total
    return totals, by_op, calls


@contextmanager
def tokenize_ranges() -> Iterator[None]:
    """Mark the text encoder's tokenization as a ``tokenize`` range while profiling."""
    from text_retrieval.model.encoder import TextEncoder

    original = TextEncoder.tokenize

    def marked(self: TextEncoder, *args: Any, **kwargs: Any) -> Any:
        with record_function("tokenize"):
            return original(self, *args, **kwargs)

    TextEncoder.tokenize = marked  # type: ignore[method-assign]
    try:
        yield
    finally:
        TextEncoder.tokenize = original  # type: ignore[method-assign]


def stepping(task: Any, on_batch: Callable[[], None]) -> Any:
    """Wrap ``task.train_batches`` so ``on_batch`` runs (and batch reading is a ``data`` range) per draw."""
    original = task.train_batches

    def batches(start_step: int) -> Iterator[Any]:
        source = original(start_step)
        while True:
            on_batch()
            with record_function("data"):
                batch = next(source)
            yield batch

    task.train_batches = batches
    return task


def run_steps(make_task: Callable[[], tuple[Any, Any]], warmup: int, active: int, profiled: bool) -> dict[str, Any]:
    """Train ``warmup + active + 1`` steps; profile the ``active`` ones or just time them."""
    task, cfg = make_task()
    marks: list[float] = []
    if not profiled:
        stepping(task, lambda: marks.append(time.perf_counter()))
        Trainer(task, cfg.train, cfg.optim, cfg, init_distributed("cpu")).fit()
        window = marks[warmup : warmup + active + 1]
        return {"step_ms": (window[-1] - window[0]) / active * 1e3}
    plan = schedule(wait=0, warmup=warmup, active=active, repeat=1)
    with profile(activities=[ProfilerActivity.CPU], schedule=plan) as prof:

        def on_batch() -> None:
            marks.append(time.perf_counter())
            if len(marks) > 1:
                prof.step()

        stepping(task, on_batch)
        Trainer(task, cfg.train, cfg.optim, cfg, init_distributed("cpu")).fit()
    window = marks[warmup : warmup + active + 1]
    wall_us = (window[-1] - window[0]) * 1e6
    totals, by_op, calls = group_events(prof.events())
    accounted = sum(v for k, v in totals.items() if k != "python+other")
    totals["python+other"] = max(0.0, wall_us - accounted)
    top = {
        k: dict(sorted(((n, v / active / 1e3) for n, v in ops.items()), key=lambda x: -x[1])[:8])
        for k, ops in by_op.items()
    }
    return {
        "profiled_step_ms": wall_us / active / 1e3,
        "kinds_ms": {k: v / active / 1e3 for k, v in totals.items()},
        "calls_per_step": {k: v / active for k, v in calls.items() if k != "python+other"},
        "top_ops_ms": top,
    }


def text_task(model: str, batch: int, lengths: tuple[int, int], precision: str, out: Path, steps: int) -> Callable:
    """A factory of the text trainer's task on the bundled training shards (cosine head, q2d InfoNCE)."""
    from text_retrieval.config import TextConfig, resolve_text_config
    from text_retrieval.data.bundled.build import build_bundled
    from text_retrieval.task import TextRetrievalTask

    shards = build_bundled(ROOT / "runs" / "data" / "text-bundled", n_test=150, corpus_size=400)["train_shards"]

    def make() -> tuple[Any, Any]:
        cfg = resolve_text_config(
            build_config(
                TextConfig,
                base={
                    "model": {"name": model, "query_max_length": lengths[0], "document_max_length": lengths[1]},
                    "data": {"train": str(shards), "batch_size": batch, "validation": [], "test": []},
                    "head": {"name": "cosine"},
                    "train": _quiet_train(out, steps, precision),
                },
            )
        )
        return TextRetrievalTask(cfg, init_distributed("cpu")), cfg

    return make


def clip_task(model: str, batch: int, precision: str, out: Path, steps: int) -> Callable:
    """A factory of the CLIP trainer's task on the bundled digits set."""
    from image_text.config import ClipConfig, resolve
    from image_text.task import ClipTask

    def make() -> tuple[Any, Any]:
        cfg = resolve(
            build_config(
                ClipConfig,
                base={
                    "model": {"name": model},
                    "data": {"batch_size": batch},
                    "train": _quiet_train(out, steps, precision),
                },
            )
        )
        return ClipTask(cfg, init_distributed("cpu")), cfg

    return make


def _quiet_train(out: Path, steps: int, precision: str) -> dict[str, Any]:
    """Training settings with nothing but steps: no validation, checkpoints, export or logs."""
    return {
        "output_dir": str(out / f"run{time.monotonic_ns()}"),
        "steps": steps,
        "device": "cpu",
        "precision": precision,
        "seed": 0,
        "eval_every": 0,
        "save_every": 0,
        "keep_best": False,
        "tensorboard": False,
        "progress": False,
        "export_final": False,
        "log_every": 1000,
    }


def sweeps_grid(args: argparse.Namespace, out: Path) -> list[tuple[str, Callable]]:
    """The sweeps' steps at their batch of 64 and lengths 32/64, in what ``precision=auto`` runs here."""
    from text_retrieval.model.packaged import SPLADE_TINY

    steps, precision, minilm = args.warmup + args.active + 1, default_precision(), args.model or default_model()
    return [
        (f"splade-tiny b64 32/64 {precision}", text_task(SPLADE_TINY, 64, (32, 64), precision, out, steps)),
        (f"minilm b64 32/64 {precision}", text_task(minilm, 64, (32, 64), precision, out, steps)),
        (f"clip {args.clip_model} b64 {precision}", clip_task(args.clip_model, 64, precision, out, steps)),
    ]


def grid(args: argparse.Namespace, out: Path) -> list[tuple[str, Callable]]:
    """The configurations to profile, each as (label, task factory)."""
    steps = args.warmup + args.active + 1
    model = args.model or default_model()
    precisions = ["fp32", "bf16"] if torch.cpu._is_avx512_bf16_supported() else ["fp32"]
    if args.sweeps:
        return sweeps_grid(args, out)
    if args.quick:
        return [("text b16 32/64 fp32", text_task(model, 16, (32, 64), "fp32", out, steps))]
    rows = [
        (f"text b{b} {q}/{d} {p}", text_task(model, b, (q, d), p, out, steps))
        for b in (16, 64)
        for q, d in ((32, 64), (64, 256))
        for p in precisions
    ]
    rows += [
        (f"clip {args.clip_model} b{args.clip_batch} {p}", clip_task(args.clip_model, args.clip_batch, p, out, steps))
        for p in precisions
    ]
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--warmup", type=int, default=2, help="unrecorded steps before the recorded ones")
    p.add_argument("--active", type=int, default=3, help="recorded steps per configuration")
    p.add_argument("--model", default=None, help="text model folder (default: the packaged all-MiniLM-L6-v2)")
    p.add_argument("--clip-model", default="clipmag-tiny")
    p.add_argument("--clip-batch", type=int, default=128)
    p.add_argument("--quick", action="store_true", help="one small text configuration only")
    p.add_argument("--sweeps", action="store_true", help="the sweeps' steps (SPLADE-tiny, MiniLM, CLIP) at batch 64")
    p.add_argument("--output", default=None, help="default: results/speed/profile_step.json (profile_sweeps.json)")
    args = p.parse_args()
    args.output = args.output or str(ROOT / "results" / "speed" / f"profile_{'sweeps' if args.sweeps else 'step'}.json")
    code_at_start()
    import transformers

    transformers.logging.set_verbosity_error()
    print(f"# training step profile on {cpu_name()}, {torch.get_num_threads()} threads, torch {torch.__version__}")
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="profile_step_") as tmp, tokenize_ranges():
        for label, make in grid(args, Path(tmp)):
            timed = run_steps(make, args.warmup, args.active, profiled=False)
            profiled = run_steps(make, args.warmup, args.active, profiled=True)
            rows.append({"config": label, **timed, **profiled})
            print_row(rows[-1])
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    record = {
        "cpu": cpu_name(),
        "cpu_bf16": bf16_units(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "code": code_at_start(),
    }
    Path(args.output).write_text(json.dumps({**record, "rows": rows}, indent=1) + "\n")
    print(f"# written to {args.output}")


def print_row(row: dict[str, Any]) -> None:
    """One configuration: step time, then each kind's share of the profiled step and its ms."""
    total = row["profiled_step_ms"]
    parts = "  ".join(f"{k} {row['kinds_ms'].get(k, 0.0) / total:4.0%}" for k in ORDER)
    print(f"{row['config']:<28} step {row['step_ms']:7.1f} ms (profiled {total:7.1f})  {parts}")


if __name__ == "__main__":
    main()
