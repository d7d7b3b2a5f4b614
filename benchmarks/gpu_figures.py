"""The arithmetic of the GPU readiness check (``gpu_check.py``), apart from any device: model FLOP
utilisation against the dense bf16 peaks of ``clipmag.runtime.devices``, the loss tolerances and
the printed report.

Kept apart so that it is tested without a GPU and without running a trainer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from clipmag.runtime.devices import peak_tflops

__all__ = ["peak_tflops", "achieved_tflops", "model_flops_utilisation", "loss_check", "report"]

# Relative tolerance of a loss against the fp32 CPU reference of the same batches, by the
# precision of the side checked. bf16 keeps 8 significant bits, so every matmul output is rounded
# by up to 2^-9 (0.2%), but the rounding errors average out over the sums of a loss: bf16 autocast
# on a CPU with AMX against fp32, at the GPU parity sizes, differed by 1.2e-4 / 3.3e-4 (text,
# steps 1 / 20) and 4.5e-5 / 2.0e-5 (CLIP). 1e-2 leaves GPU kernels (other reduction orders, fused
# attention) 30x that, and still catches what moves a loss by a percent or more: a wrong
# reduction across ranks, a lost gradient, a mis-cast. fp32 on both sides differs only in the
# order of summation.
LOSS_TOLERANCE = {"bf16": 1e-2, "fp32": 1e-4}


def achieved_tflops(flops_per_sample: float, samples_per_s: float) -> float:
    """Model FLOP/s of the whole run, in TFLOP/s (samples/s counts every rank's samples)."""
    return flops_per_sample * samples_per_s / 1e12


def model_flops_utilisation(
    flops_per_sample: float, samples_per_s: float, world_size: int, peak: float | None
) -> float | None:
    """Achieved model FLOP/s over the peak of all ``world_size`` devices; None without a peak."""
    if peak is None:
        return None
    return achieved_tflops(flops_per_sample, samples_per_s) / (world_size * peak)


def relative_difference(value: float, reference: float) -> float:
    """|value - reference| / |reference| (the absolute difference where the reference is 0)."""
    return abs(value - reference) / (abs(reference) or 1.0)


def loss_tolerance(precision: str) -> float:
    """The relative tolerance of a loss computed at ``precision`` against fp32."""
    if precision not in LOSS_TOLERANCE:
        raise ValueError(f"no loss tolerance for precision {precision!r}; known: {', '.join(LOSS_TOLERANCE)}")
    return LOSS_TOLERANCE[precision]


def loss_check(step: int, value: float, reference: float, precision: str) -> dict[str, float | int | bool]:
    """One loss against its reference: the values, the relative difference, the tolerance, the verdict."""
    difference, tolerance = relative_difference(value, reference), loss_tolerance(precision)
    return {
        "step": step,
        "loss": value,
        "reference": reference,
        "relative_difference": difference,
        "tolerance": tolerance,
        "passed": difference <= tolerance,
    }


def format_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A plain text table, columns as wide as their widest cell; floats to 4 significant digits."""
    cells = [[f"{c:.4g}" if isinstance(c, float) else str(c) for c in row] for row in [header, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in cells)


def _mfu_cell(mfu: float | None, kind: str) -> str:
    if mfu is not None:
        return f"{mfu:.1%}"
    return "-" if kind == "cpu" else "unknown"


def report(result: dict[str, Any]) -> str:
    """The printed tables of a check's figures (the JSON that ``gpu_check.py`` writes)."""
    kind = result["kind"]
    lines = [f"GPU readiness check on {result['device']} ({kind}), torch {result['torch']}", ""]
    header = ["trainer", "device", "precision", "ranks", "backend", "batch", "steps", "samples/s", "GFLOP/sample"]
    rows = [
        [r["trainer"], r["device"], r["precision"], r["world_size"], r["backend"], r["global_batch"], r["steps"]]
        + [r["samples_per_s"], r["flops_per_sample"] / 1e9, r["achieved_tflops"], _mfu_cell(r["mfu"], kind)]
        for r in result["throughput"]
    ]
    lines.append(format_table([*header, "TFLOP/s", "MFU"], rows))
    if kind == "cpu":
        lines.append("no MFU on the cpu (the table of peaks is of GPUs)")
    elif result["peak_bf16_tflops"]:
        lines.append(f"MFU against {result['peak_bf16_tflops']:.0f} TFLOP/s dense bf16 per device")
    else:
        lines.append(f"MFU unknown: no dense bf16 peak for {result['device']} in clipmag.runtime.devices.DEVICES")
    header = ["trainer", "step", f"{result['precision']} {kind} loss", "fp32 cpu loss", "rel. diff", "tolerance", ""]
    rows = [
        [r["trainer"], r["step"], r["loss"], r["reference"], r["relative_difference"], r["tolerance"]]
        + ["ok" if r["passed"] else "FAIL"]
        for r in result["loss_parity"]
    ]
    lines += ["", format_table(header, rows)]
    if result["scifact"]:
        s = result["scifact"]
        verdict = "ok" if s["passed"] else "FAIL"
        lines.append(f"\nSciFact NDCG@10 {s['ndcg@10']:.4f} (expected {s['expected']} +- {s['tolerance']}): {verdict}")
    lines += [f"\nerror in {e}" for e in result["errors"]]
    lines.append(f"\n{'all checks passed' if result['passed'] else 'CHECK FAILED'} in {result['seconds']:.0f} s")
    return "\n".join(lines)
