"""The accelerators a cost plan or the GPU check can name, with their dense bf16 peaks.

Dense (no sparsity) bf16 tensor-core peaks in TFLOP/s from the vendors' data sheets. ``name`` is
what a plan takes (``--device h100``); ``pattern`` matches ``torch.cuda.get_device_name()``, tried in
this order (the H100 variants before plain H100).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Device", "DEVICES", "device_named", "peak_tflops"]


@dataclass(frozen=True)
class Device:
    name: str
    pattern: str
    dense_bf16_tflops: float


DEVICES: tuple[Device, ...] = (
    Device("b200", r"\bB200\b", 2250.0),
    Device("h200", r"\bG?H200\b", 989.0),
    Device("h100-pcie", r"\bH100\b.*\bPCIe\b", 756.0),
    Device("h100-nvl", r"\bH100\b.*\bNVL\b", 835.0),
    Device("h100", r"\bH100\b", 989.0),  # SXM, named "NVIDIA H100 80GB HBM3"
    Device("a100", r"\bA100\b", 312.0),
    Device("l40s", r"\bL40S\b", 362.0),
    Device("l4", r"\bL4\b", 121.0),
    Device("a10", r"\bA10\b", 125.0),
)


def device_named(name: str) -> Device:
    """The device a plan names (``h100``, ``a100``, ...)."""
    for device in DEVICES:
        if device.name == name.lower():
            return device
    raise ValueError(f"unknown device {name!r}; known: {', '.join(d.name for d in DEVICES)}")


def peak_tflops(device_name: str) -> float | None:
    """The dense bf16 peak of a device by what CUDA calls it, or None for a device not in the table."""
    for device in DEVICES:
        if re.search(device.pattern, device_name):
            return device.dense_bf16_tflops
    return None
