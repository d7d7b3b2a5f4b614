"""Packed cells: N training runs at once with T/N threads each, against one run with all T threads.

A sweep's cells are independent runs; ``pack: N`` (clipmag_experiments/sweep/packing.py) runs N of
them at once, each on its share of the threads. Whether that pays depends on the model: a small
one does not split its matrices well over threads, a large one does. This benchmark answers it per
model size of the sweeps (SPLADE-tiny, all-MiniLM-L6-v2, the CLIP towers), on the sweeps' step
(batch 64, lengths 32/64, ``precision=auto``), with the trainers' real command lines, each run a
process of its own as a packed sweep starts it:

* ``1 x T``: one run with ``train.threads=T`` (T: torch's thread count here, ``--threads``);
* ``N x T/N``: N runs started together, each with ``train.threads=T/N``.

Two rates per side: the training samples per second of all its runs together (each run's median
per-step rate after ``--warmup`` steps, summed: the step alone), and whole runs per hour from the
wall time of the side (process start, imports, model load and the steps: what a sweep of short
cells sees). Rounds rotate the order of the sides; the ratios are packed / single, above 1 means
packing is faster. The record (``--output``) names the CPU and its bf16 units, which decide the
answer (AMX runs bf16 GEMMs far faster than AVX-512, so its matrices are "larger").

    python benchmarks/bench_packed_cells.py --output results/speed/packed_cells.json
    python benchmarks/bench_packed_cells.py --models clip --steps 6 --rounds 1     # a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from harness import ROOT, code_at_start, load_average, print_header, spread, write_record

from clipmag.runtime.machine import bf16_units

TEXT_MODULE, CLIP_MODULE = "text_retrieval.cli", "image_text.cli"
MODELS = ("splade-tiny", "minilm", "clip")
QUIET = [
    "train.device=cpu",
    "train.save_every=0",
    "train.eval_every=0",
    "train.keep_best=false",
    "train.export_final=false",
    "train.tensorboard=false",
    "train.progress=false",
    "train.log_every=1",
    "train.precision=auto",
]


def model_args(name: str, shards: Path) -> tuple[str, list[str]]:
    """The trainer module and arguments of one model size at the sweeps' step."""
    if name == "clip":
        return CLIP_MODULE, ["model.name=clipmag-tiny", "data.batch_size=64"]
    model = "splade-tiny" if name == "splade-tiny" else "all-MiniLM-L6-v2"
    lengths = ["model.query_max_length=32", "model.document_max_length=64"]
    data = [f"data.train={shards}", "data.validation=[]", "data.test=[]", "data.batch_size=64"]
    return TEXT_MODULE, [f"model.name={model}", "--norm", "cosine", *lengths, *data]


def start_run(module: str, args: list[str], threads: int, steps: int, out: Path) -> subprocess.Popen:
    """One training run as a packed sweep starts a cell: its own process, its threads pinned."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": str(threads)}
    cmd = [sys.executable, "-m", module, *args, *QUIET, f"train.steps={steps}", f"train.threads={threads}"]
    log = (out.parent / f"{out.name}.log").open("w")
    return subprocess.Popen([*cmd, "--output", str(out)], env=env, stdout=log, stderr=subprocess.STDOUT)


def step_rate(out: Path, warmup: int) -> float:
    """A run's median training samples per second over its steps after ``warmup``."""
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    rates = [r["samples_per_s"] for r in rows if r.get("kind") == "train" and r["step"] > warmup]
    return statistics.median(rates)


def run_side(module: str, args: list[str], runs: int, threads: int, steps: int, warmup: int, tmp: Path) -> dict:
    """``runs`` runs at once with ``threads`` each: their summed step rate and runs per hour."""
    start = time.perf_counter()
    outs = [tmp / f"run{time.monotonic_ns()}-{i}" for i in range(runs)]
    procs = [start_run(module, args, threads, steps, out) for out in outs]
    for proc, out in zip(procs, outs):
        if proc.wait() != 0:
            raise SystemExit(f"a run failed; its log: {out.parent / f'{out.name}.log'}")
    wall = time.perf_counter() - start
    return {"samples_per_s": sum(step_rate(out, warmup) for out in outs), "runs_per_hour": runs * 3600 / wall}


def measure_model(name: str, args: argparse.Namespace, shards: Path, tmp: Path) -> dict:
    """Both sides for one model size, ``--rounds`` times in alternating order, and their ratios."""
    module, margs = model_args(name, shards)
    sides = {"single": (1, args.threads), "packed": (args.pack, args.threads // args.pack)}
    results: dict[str, list[dict]] = {side: [] for side in sides}
    for r in range(args.rounds):
        for side in list(sides) if r % 2 == 0 else list(sides)[::-1]:
            runs, threads = sides[side]
            got = run_side(module, margs, runs, threads, args.steps, args.warmup, tmp)
            results[side].append(got)
            shown = f"{got['samples_per_s']:8.1f} samples/s {got['runs_per_hour']:7.1f} runs/h"
            print(f"  {name:<12} round {r + 1} {runs} x {threads:<3} {shown}", flush=True)
    ratios = {
        key: [a[key] / b[key] for a, b in zip(results["packed"], results["single"])]
        for key in ("samples_per_s", "runs_per_hour")
    }
    rates, runs = spread(ratios["samples_per_s"]), spread(ratios["runs_per_hour"])
    print(f"  {name}: packed / single: samples/s {rates}, runs/h {runs}")
    return {"sides": results, "ratios": ratios}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    p.add_argument("--pack", type=int, default=2, help="runs at once on the packed side")
    p.add_argument("--threads", type=int, default=torch.get_num_threads(), help="threads of the single run")
    p.add_argument("--steps", type=int, default=20, help="training steps per run")
    p.add_argument("--warmup", type=int, default=3, help="steps left out of the step rate")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--output", type=Path, default=None, help="the figures as JSON (results/speed/packed_cells.json)")
    args = p.parse_args()
    if args.threads < args.pack:
        p.error(f"--threads {args.threads} cannot be split between --pack {args.pack} runs")
    code_at_start()
    print_header(f"packed cells: {args.pack} runs x {args.threads // args.pack} threads vs 1 x {args.threads}")
    from text_retrieval.data.bundled.build import build_bundled

    shards = build_bundled(ROOT / "runs" / "data" / "text-bundled")["train_shards"]
    with tempfile.TemporaryDirectory(prefix="packed_cells_") as tmp:
        models = {name: measure_model(name, args, shards, Path(tmp)) for name in args.models}
    print(f"  load average at end (1 / 5 / 15 min): {load_average()}; bf16 units: {', '.join(bf16_units()) or 'none'}")
    if args.output:
        sides = {"single": f"1 x {args.threads}", "packed": f"{args.pack} x {args.threads // args.pack}"}
        write_record(args.output, "packed_cells", args, {"sides": sides, "models": models})


if __name__ == "__main__":
    main()
