"""GPU readiness check: both trainers under bf16 on every GPU present, with their throughput, model
FLOP utilisation, loss parity against fp32 on the CPU, and untuned MiniLM on SciFact.

On CUDA (``--device auto`` finds it), with N = the GPUs present (``--nproc`` for fewer), every
training run is ``python -m torch.distributed.run --standalone --nproc_per_node=N`` of the real
trainer script, so NCCL joins the ranks when N > 1 (``clipmag.runtime.distributed``). Sizes are in
``gpu_profiles.py``.

1. Throughput: the text trainer (``scripts/train_text.py``: all-MiniLM-L6-v2, global batch 256 as
   in the paper, query / document max length 64 / 256) and the CLIP trainer
   (``scripts/train_clip.py``: its default ``clipmag-tiny`` on the bundled digits, 1024 pairs per
   rank), 300 steps each at ``train.precision=bf16``. samples/s is the median of the trainer's
   logged windows of 20 steps, the first (start-up) left out. FLOPs per sample are counted, not
   estimated: ``torch.utils.flop_counter.FlopCounterMode`` over forward + backward of the same
   model on its first 3 batches (matmuls, convolutions and attention; elementwise work is not
   counted, so the utilisation is a lower bound). MFU is the achieved model FLOP/s over N x the
   device's dense bf16 peak (``clipmag.runtime.devices``); a device missing from that table
   gets samples/s and "MFU unknown".
2. Loss parity: each trainer runs 20 steps on the GPU in bf16 and again on the CPU in fp32 (gloo,
   the same N ranks and seeds, hence the same batches), the text trainer with a copy of MiniLM
   whose dropout is off (CUDA and the CPU draw different masks). The losses at steps 1 and 20 must
   agree within ``gpu_figures.LOSS_TOLERANCE``: relative 1e-2 for bf16 (the reason is given there).
3. SciFact: ``scripts/eval_text.py`` with the untuned all-MiniLM-L6-v2 (``precision=auto``: bf16 on
   the GPU) must give NDCG@10 within 0.002 of 0.6451 (MTEB's figure, which fp32 gives exactly;
   bf16 autocast on a CPU gives 0.6466).

Without a GPU the same code runs on the CPU as a rehearsal: fp32, gloo, 2 ranks, 6 steps (3 for
parity) of small batches, the same table with "cpu" and no MFU. The figures go to ``--output`` as
JSON; the exit status is 0 when every check passed, else 1. A check that fails is reported and the
others still run. Every run ends within ``--timeout`` and the whole check within ``--budget``
(450 s on a GPU), so that it fits the time a GPU is lent for.

    python benchmarks/gpu_check.py [--output runs/gpu_check.json] [--scifact PATH] [--device auto]
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
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch
from gpu_figures import achieved_tflops, loss_check, model_flops_utilisation, peak_tflops, report
from gpu_model import FLOP_BATCHES, flops_per_sample, without_dropout
from gpu_profiles import SCRIPTS, Profile, cpu_profile, gpu_profile, trainer_args
from harness import ROOT, cpu_name

from clipmag.config.entry import run_entry_point
from clipmag.runtime.logs import read_metrics
from image_text.model.config import ClipModelConfig

SCIFACT = Path(os.environ.get("CLIPMAG_SHARED_DATA", ROOT.parent / "shared" / "data")) / "beir" / "scifact"
SCIFACT_NDCG, SCIFACT_TOLERANCE = 0.6451, 0.002
BUDGET_S = 450  # the whole check on a GPU, under 8 minutes; the CPU rehearsal gets 4x


class CheckFailed(RuntimeError):
    """A run of the check did not give its figures (it failed, timed out or logged too little)."""


@dataclass(frozen=True)
class TimeLimit:
    """Seconds one run may take: ``per_run``, and never past the whole check's ``deadline``
    (``time.monotonic()``), so that the check fits the time a GPU is lent for."""

    per_run: float
    deadline: float

    def next_run(self, script: str) -> float:
        left = self.deadline - time.monotonic()
        if left < 5:
            raise CheckFailed(f"no time left for {script} in the check's --budget")
        return min(self.per_run, left)


def launch(script: str, argv: Sequence[str], nproc: int, log: Path, limit: TimeLimit, cuda: bool) -> None:
    """``script`` under torchrun with ``nproc`` ranks (``nproc=0``: one plain process), output to ``log``;
    ``cuda=False`` hides the GPUs from it."""
    launcher = ["-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}"] if nproc else []
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // max(nproc, 1)))
    if not cuda:
        env["CUDA_VISIBLE_DEVICES"] = ""
    command = [sys.executable, *launcher, script, *argv]
    timeout = limit.next_run(script)
    with log.open("w") as handle:
        try:
            proc = subprocess.run(command, cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise CheckFailed(f"{script} did not finish in {timeout:.0f} s") from None
    if proc.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
        raise CheckFailed(f"{script} exited with status {proc.returncode}; the end of its output:\n{tail}")


def train(
    trainer: str, p: Profile, parity: bool, work: Path, name: str, text_model: str, limit: TimeLimit
) -> list[dict]:
    """One run of a trainer (its parity size or its throughput size); its logged training records."""
    out = work / name
    size = p.parity if parity else p.throughput
    argv = trainer_args(trainer, p, size, out, work, text_model)
    launch(SCRIPTS[trainer], argv, p.world_size, work / f"{name}.log", limit, p.device == "cuda")
    return read_metrics(out / "metrics.jsonl", "train")


def throughput(trainer: str, p: Profile, work: Path, text_model: str, peak: float | None, limit: TimeLimit) -> dict:
    """samples/s over the logged windows after the first, FLOPs per sample and MFU."""
    device = torch.device("cuda", 0) if p.device == "cuda" else torch.device("cpu")
    argv = trainer_args(trainer, p, p.throughput, work / "flops", work, text_model)
    flops = flops_per_sample(trainer, argv, device)
    records = train(trainer, p, False, work, f"{trainer}-throughput", text_model, limit)
    rates = [r["samples_per_s"] for r in records][1:]  # the first window holds the start-up
    if not rates:
        raise CheckFailed(f"the {trainer} run logged {len(records)} window(s); the first (start-up) is not counted")
    samples_per_s = statistics.median(rates)
    batch = p.throughput.text_batch if trainer == "text" else p.throughput.clip_batch
    return {
        "trainer": trainer,
        "model": text_model if trainer == "text" else ClipModelConfig().name,
        "device": p.device,
        "precision": p.precision,
        "world_size": p.world_size,
        "backend": p.backend,
        "global_batch": batch * p.world_size,
        "steps": p.throughput.steps,
        "windows": len(rates),
        "samples_per_s": samples_per_s,
        "flops_per_sample": flops,
        "achieved_tflops": achieved_tflops(flops, samples_per_s),
        "mfu": model_flops_utilisation(flops, samples_per_s, p.world_size, peak),
    }


def parity(trainer: str, p: Profile, work: Path, text_model: str, limit: TimeLimit) -> list[dict[str, Any]]:
    """The losses at the first and last parity step against fp32 on the CPU, same ranks and batches."""
    model = str(without_dropout(text_model, work / "no-dropout")) if trainer == "text" else text_model
    checked = train(trainer, p, True, work, f"{trainer}-parity-{p.device}", model, limit)
    reference = replace(p, device="cpu", precision="fp32")
    expected = train(trainer, reference, True, work, f"{trainer}-parity-reference", model, limit)
    ours, theirs = ({r["step"]: r["loss"] for r in records} for records in (checked, expected))
    rows = []
    for step in (1, p.parity.steps):
        if step not in ours or step not in theirs:
            raise CheckFailed(f"the {trainer} parity runs logged no loss at step {step}")
        rows.append({"trainer": trainer, **loss_check(step, ours[step], theirs[step], p.precision)})
    return rows


def scifact(path: Path, text_model: str, p: Profile, work: Path, expected: float, limit: TimeLimit) -> dict[str, Any]:
    """NDCG@10 of the untuned model on a BEIR folder, by ``scripts/eval_text.py`` on the profile's device."""
    if not (path / "corpus.jsonl").is_file():
        raise CheckFailed(f"no BEIR folder at {path} (corpus.jsonl missing): pass --scifact PATH")
    out = work / "scifact"
    argv = ["--model", text_model, "--data", str(path), "--output", str(out), "--quiet"]
    launch("scripts/eval_text.py", argv, 0, work / "scifact.log", limit, p.device == "cuda")
    (record,) = [json.loads(f.read_text()) for f in out.glob("*.json")]
    ndcg = record["metrics"]["NDCG@10"]
    passed = abs(ndcg - expected) <= SCIFACT_TOLERANCE
    return {"path": str(path), "ndcg@10": ndcg, "expected": expected, "tolerance": SCIFACT_TOLERANCE, "passed": passed}


def choose_profile(device: str, nproc: int | None) -> tuple[Profile, str]:
    """The profile for ``--device`` and ``--nproc``, and the name of the device it runs on."""
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: CUDA is not available on this machine (use --device auto or cpu)")
    if nproc is not None and nproc < 1:
        raise ValueError(f"--nproc {nproc}: at least one rank is needed")
    if device != "cpu" and torch.cuda.is_available():
        count = torch.cuda.device_count()
        if nproc is not None and nproc > count:
            raise ValueError(f"--nproc {nproc}: this machine has {count} GPU(s), and NCCL needs one GPU per rank")
        return gpu_profile(nproc or count), torch.cuda.get_device_name(0)
    return cpu_profile(nproc or 2), cpu_name()


def run_checks(args: argparse.Namespace, p: Profile, peak: float | None, work: Path, result: dict[str, Any]) -> None:
    """Every check in turn, its figures into ``result``; a failing one is recorded and the next still runs."""
    start = time.perf_counter()
    budget = args.budget or (BUDGET_S if p.device == "cuda" else 4 * BUDGET_S)
    limit = TimeLimit(args.timeout, time.monotonic() + budget)

    def attempt(label: str, check: Callable[..., Any], *check_args: Any) -> Any:
        print(f"[{time.perf_counter() - start:4.0f} s] {label}", flush=True)
        try:
            return check(*check_args)
        except Exception as err:  # one failing check must not hide the figures of the others
            result["errors"].append(f"{label}: {type(err).__name__}: {err}")
            return None

    for trainer in SCRIPTS:
        row = attempt(f"{trainer} throughput", throughput, trainer, p, work, args.text_model, peak, limit)
        result["throughput"] += [row] if row else []
    for trainer in SCRIPTS:
        rows = attempt(f"{trainer} loss parity", parity, trainer, p, work, args.text_model, limit)
        result["loss_parity"] += rows or []
    result["scifact"] = attempt(
        "SciFact", scifact, args.scifact or SCIFACT, args.text_model, p, work, args.scifact_expected, limit
    )


def main(argv: Sequence[str]) -> dict[str, Any]:
    """Run every check, print the tables, write the JSON; returns what was written."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    parser.add_argument("--nproc", type=int, default=None, help="ranks (default: every GPU; 2 on the CPU)")
    parser.add_argument("--output", type=Path, default=ROOT / "runs" / "gpu_check.json")
    parser.add_argument("--scifact", type=Path, default=None, help=f"a BEIR folder (default: {SCIFACT})")
    parser.add_argument("--scifact-expected", type=float, default=SCIFACT_NDCG, help="its expected NDCG@10")
    parser.add_argument("--text-model", default="all-MiniLM-L6-v2")
    parser.add_argument("--timeout", type=float, default=300, help="seconds one run may take")
    parser.add_argument("--budget", type=float, default=None, help=f"seconds in all (default {BUDGET_S} on a GPU)")
    args = parser.parse_args(argv)
    if args.scifact and not (args.scifact / "corpus.jsonl").is_file():
        raise FileNotFoundError(f"--scifact {args.scifact}: no BEIR folder there (corpus.jsonl missing)")
    profile, name = choose_profile(args.device, args.nproc)
    peak = peak_tflops(name) if profile.device == "cuda" else None
    start = time.perf_counter()
    result: dict[str, Any] = {
        "device": name,
        "kind": profile.device,
        "precision": profile.precision,
        "peak_bf16_tflops": peak,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "profile": asdict(profile),
        "flop_batches": FLOP_BATCHES,
        "throughput": [],
        "loss_parity": [],
        "scifact": None,
        "errors": [],
    }
    with tempfile.TemporaryDirectory(prefix="gpu_check_") as work:
        run_checks(args, profile, peak, Path(work), result)
    checks = [*result["loss_parity"], *([result["scifact"]] if result["scifact"] else [])]
    result["passed"] = not result["errors"] and all(c["passed"] for c in checks)
    result["seconds"] = time.perf_counter() - start
    print(report(result), flush=True)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=1) + "\n")
    print(f"figures written to {args.output}")
    return result


if __name__ == "__main__":
    run_entry_point(lambda argv: sys.exit(0 if main(argv)["passed"] else 1))
