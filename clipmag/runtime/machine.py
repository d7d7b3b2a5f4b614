"""The machine a figure was measured on, named beside it: CPU classes differ several-fold in speed
(with or without AMX) and in the last bits of every result (AVX2 vs AVX-512 kernels)."""

from __future__ import annotations

import platform

__all__ = ["BF16_UNITS", "bf16_units", "cpu_name", "cpuinfo"]

# the CPU flags that decide how fast and in which order bf16 products are summed: AVX-512 BF16 dot
# products, and AMX tiles (a bf16 GEMM several times an fp32 one)
BF16_UNITS = ("avx512_bf16", "amx_bf16")


def cpuinfo(key: str) -> str:
    """The first value of ``key`` in /proc/cpuinfo (empty where there is none)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith(key):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def cpu_name() -> str:
    """The CPU's model name, as /proc/cpuinfo (else the platform) gives it."""
    return cpuinfo("model name") or platform.processor()


def bf16_units() -> list[str]:
    """The bf16 units of :data:`BF16_UNITS` this CPU has (empty on AVX2, or where /proc/cpuinfo is not)."""
    flags = set(cpuinfo("flags").split())
    return [unit for unit in BF16_UNITS if unit in flags]
