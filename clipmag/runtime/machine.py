"""The machine a figure was measured on, named beside it: CPU classes differ several-fold in speed
(with or without AMX) and in the last bits of every result (AVX2 vs AVX-512 kernels)."""

from __future__ import annotations

import platform

__all__ = ["cpu_name", "cpuinfo"]


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
