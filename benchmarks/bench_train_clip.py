"""Training throughput: clipmag's image-text trainer vs open_clip_train's own loop, side by side.

Both train the same open_clip architecture (``clipmag-tiny`` by default) with the same per-step
batch on the same images and captions (the bundled digits written to a temporary folder), on
whatever device each picks (CUDA if present). clipmag reads them as resampled WebDataset shards;
open_clip_train reads them through its CSV loader (image files + a tab-separated caption table),
because its own WebDataset reader (``tarfile_to_samples_nothrow``) fails with webdataset 1.0
(``KeyError: 'fname'``). Both decode PNGs and tokenize per sample, so the data cost is alike.
open_clip runs as a subprocess of ``open_clip_train.main.main`` (its CLI entry point, after
registering our JSON architecture, which ``python -m open_clip_train.main`` alone cannot see);
clipmag runs ``scripts/train_clip.py``.
Throughput is read from each trainer's own log (open_clip: ``Batch (t)`` per log window; clipmag:
``samples_per_s`` in ``metrics.jsonl``), dropping the first window (start-up) of each.

Sides: clipmag at fp32 and bf16 autocast (``train.precision``; its default ``auto`` is bf16 on a
CPU with native bf16), open_clip_train at fp32, at ``amp_bf16`` and at its default ``amp`` (fp16
autocast with a gradient scaler, also on the CPU). The two bf16 sides run only where the device
computes bf16 natively (``harness.select_sides``; the output says when they were skipped); the
peer's default stays, since it is what the defaults comparison is about. Rounds rotate the order
of the sides; medians of the per-round ratios are reported with their range. The FLOPs of one
clipmag step (forward + backward, FlopCounterMode) give the achieved rate against the CPU's peak.
``--before KEY=VALUE`` (repeatable) adds our sides once more with those ``train`` settings (the
code as it was before a speed-up that a setting switches off). ``--output`` writes every side's
per-round rates, the ratios, the FLOP rates, the CPU and the code state as JSON.

    python benchmarks/bench_train_clip.py [--steps 60] [--batch-size 128] [--model clipmag-tiny] \
        [--workers 0] [--rounds 3] [--before cpu_math_attention=false]
    python benchmarks/bench_train_clip.py --before cpu_math_attention=false --output results/speed/train_clip.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch
from harness import (
    CPU,
    OUR_DTYPES,
    ROOT,
    before_setting,
    code_at_start,
    count_flops,
    default_precision,
    print_comparison,
    print_flop_rate,
    print_header,
    ratio,
    rounds,
    select_sides,
    spread,
    write_record,
)

from image_text.data import bundled, shards
from image_text.model.config import MODEL_CONFIG_DIR

OPEN_CLIP_LAUNCH = (
    "import sys, open_clip; open_clip.add_model_config(sys.argv[1]); "
    "from open_clip_train.main import main; main(sys.argv[2:])"
)


def write_data(directory: Path, n: int) -> tuple[str, str]:
    """The same samples as WebDataset shards and as PNG files + a CSV; returns (pattern, csv path)."""
    sets = bundled.build_bundled(n_train=n, n_test=10, n_per_class=1)
    samples = [(f"{i:07d}", sets.train.pil(i), sets.train.captions[i][0], None) for i in range(n)]
    paths = shards.write_shards(samples, directory / "shards", shard_size=max(1, n // 4))
    (directory / "png").mkdir(parents=True)
    rows = ["filepath\ttitle"]
    for key, image, caption, _ in samples:
        image.save(directory / "png" / f"{key}.png")
        rows.append(f"{directory / 'png' / key}.png\t{caption}")
    (directory / "train.csv").write_text("\n".join(rows) + "\n")
    return str(directory / "shards" / f"shard-{{000000..{len(paths) - 1:06d}}}.tar"), str(directory / "train.csv")


def run(cmd: list[str], log: Path, threads: int) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": str(threads)}
    with log.open("w") as f:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        raise SystemExit(
            f"{' '.join(cmd[:3])} ... failed (exit {proc.returncode}); see {log}:\n{log.read_text()[-3000:]}"
        )


def bench_clipmag(pattern: str, args: argparse.Namespace, out: Path, precision: str, before: bool = False) -> float:
    settings = [f"train.{key}={json.dumps(value)}" for key, value in args.before.items()] if before else []
    run(
        [
            sys.executable,
            "scripts/train_clip.py",
            "data.source=shards",
            f"data.train={pattern}",
            f"model.name={args.model}",
            f"data.batch_size={args.batch_size}",
            f"train.steps={args.steps}",
            f"train.log_every={args.log_every}",
            "train.save_every=0",
            "train.export_final=false",
            "train.tensorboard=false",
            "train.progress=false",
            f"train.precision={precision}",
            f"data.workers={args.workers}",
            f"train.output_dir={out}",
            *settings,
        ],
        out.with_suffix(".log"),
        args.threads,
    )
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    rates = [r["samples_per_s"] for r in records if r["kind"] == "train"][1:]
    return statistics.mean(rates)


def bench_open_clip(csv: str, args: argparse.Namespace, out: Path, precision: str) -> float:
    epochs = -(-args.steps // (args.samples // args.batch_size))
    run(
        [
            sys.executable,
            "-c",
            OPEN_CLIP_LAUNCH,
            str(MODEL_CONFIG_DIR),
            "--train-data",
            csv,
            "--dataset-type",
            "csv",
            "--csv-separator",
            "\t",
            "--csv-img-key",
            "filepath",
            "--csv-caption-key",
            "title",
            "--epochs",
            str(epochs),
            "--workers",
            str(args.workers),
            "--batch-size",
            str(args.batch_size),
            "--model",
            args.model,
            "--lr",
            "2e-3",
            "--warmup",
            "30",
            "--wd",
            "0.1",
            "--precision",
            precision,
            "--local-loss",
            "--gather-with-grad",
            "--save-frequency",
            "0",
            "--log-every-n-steps",
            str(args.log_every),
            "--report-to",
            "",
            "--logs",
            str(out.parent),
            "--name",
            out.name,
            "--seed",
            "0",
        ],
        out.with_suffix(".log"),
        args.threads,
    )
    text = (out / "out.log").read_text()
    times = [float(t) for t in re.findall(r"Batch \(t\): ([0-9.]+)", text)][1:]
    return args.batch_size / statistics.mean(times)


def step_flops(pattern: str, args: argparse.Namespace) -> int:
    """FLOPs of one clipmag training step (forward + backward) on a batch of the benchmark's shards."""
    from clipmag.config.build import build_config
    from clipmag.runtime.distributed import init_distributed
    from image_text.config import ClipConfig, resolve
    from image_text.task import ClipTask

    overrides = [f"model.name={args.model}", f"data.batch_size={args.batch_size}", f"data.train={pattern}"]
    task = ClipTask(
        resolve(build_config(ClipConfig, overrides=[*overrides, "train.device=cpu"])), init_distributed("cpu")
    )
    model, batch = task.build_model(), next(task.train_batches(0))
    return count_flops(lambda: model(batch)["loss"].backward())


def sides(pattern: str, csv: str, args: argparse.Namespace, work: Path) -> dict[str, Callable[[], float]]:
    """Both trainers at fp32 and the peer at its default, plus both at bf16 where the device that the
    trainers pick (CUDA if present) computes bf16 natively."""
    runs = iter(range(1_000_000))  # a fresh output folder for every run

    def ours(precision: str, before: bool = False) -> Callable[[], float]:
        return lambda: bench_clipmag(pattern, args, work / f"clipmag{next(runs)}", precision, before)

    def theirs(precision: str) -> Callable[[], float]:
        return lambda: bench_open_clip(csv, args, work / f"open_clip{next(runs)}", precision)

    device = torch.device("cuda") if torch.cuda.is_available() else CPU
    always = {"clipmag fp32": ours("fp32"), "open_clip fp32": theirs("fp32"), "open_clip amp (default)": theirs("amp")}
    bf16 = {"clipmag bf16": ours("bf16"), "open_clip amp_bf16": theirs("amp_bf16")}
    if args.before:
        always["clipmag fp32 before"] = ours("fp32", before=True)
        bf16["clipmag bf16 before"] = ours("bf16", before=True)
    return select_sides(always, bf16, device)


# ratios of the --before sides: ours after / before the speed-up, and ours before / the peer
BEFORE_RATIOS = {
    "fp32 after/before": ("clipmag fp32", "clipmag fp32 before"),
    "bf16 after/before": ("clipmag bf16", "clipmag bf16 before"),
    "bf16: clipmag before / open_clip amp_bf16": ("clipmag bf16 before", "open_clip amp_bf16"),
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--model", default="clipmag-tiny")
    p.add_argument("--samples", type=int, default=4000)
    p.add_argument("--workers", type=int, default=0, help="data-loader worker processes, the same on both sides")
    p.add_argument("--rounds", type=int, default=3, help="rounds; the order of the sides rotates")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="torch threads of each trainer")
    p.add_argument("--before", type=before_setting, action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--output", type=Path, default=None, help="JSON file for the figures")
    args = p.parse_args()
    if args.output:
        code_at_start()  # before anything is measured or written
    args.before = dict(args.before)
    torch.set_num_threads(args.threads)  # the FLOP count and the GEMM reference on the trainers' threads
    print_header(
        f"CLIP training, {args.model}, batch {args.batch_size}, ~{args.steps} steps, {args.workers} loader workers, "
        f"{args.threads} torch threads per trainer, "
        f"same images and captions, {args.rounds} rounds; clipmag's default precision here: {default_precision()}"
    )
    with tempfile.TemporaryDirectory(prefix="bench_clip_") as tmp:
        work = Path(tmp)
        pattern, csv = write_data(work / "data", args.samples)
        sps = rounds(sides(pattern, csv, args, work), args.rounds, lambda r: f"{r:7.1f} samples/s")
        flops = step_flops(pattern, args)
    ratios = print_comparison(sps, "samples/s", "open_clip amp (default)", "open_clip amp_bf16")
    for name, (a, b) in BEFORE_RATIOS.items():
        if a in sps and b in sps:
            ratios[name] = ratio(sps[a], sps[b])
            print(f"    {name:<56}{spread(ratios[name])}")
    flop_rates = {
        name: print_flop_rate(f"{name} step", flops, [args.batch_size / v for v in sps[name]], OUR_DTYPES[name])
        for name in OUR_DTYPES
        if name in sps
    }
    if args.output:
        figures = {"samples_per_s": sps, "flop_rates": flop_rates, "ratios": ratios}
        write_record(args.output, "bench_train_clip", args, figures)


if __name__ == "__main__":
    main()
