"""Which number format matmuls run in: fp32, or bf16 / fp16 autocast over fp32 weights.

``auto`` takes bf16 autocast wherever the hardware computes bf16 natively - a CUDA GPU with bf16
units, or a CPU with AVX-512 BF16 or AMX, where oneDNN runs bf16 matmuls at up to twice the fp32
rate - and fp32 everywhere else, because a CPU without those instructions emulates bf16, which
costs accuracy and is typically no faster. The hardware is asked through torch's own capability
queries (``torch.cpu._is_*_supported``, ``torch.cuda.is_bf16_supported``), not a list of models.

Autocast changes only the dtype that matmuls, convolutions and attention compute in: weights,
gradients and optimizer state stay fp32 (master weights), and the similarity heads and losses
switch autocast off and compute in fp32 (``clipmag.scoring.heads``).
"""

from __future__ import annotations

import functools
import platform

import torch

__all__ = ["PRECISIONS", "autocast", "autocast_dtype", "check_precision", "cpu_has_native_bf16", "native_bf16"]

PRECISIONS = ("auto", "fp32", "bf16", "fp16")
_DTYPES: dict[str, torch.dtype | None] = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}
_X86 = ("x86_64", "amd64", "i386", "i686")


def _torch_cpu_query(name: str) -> bool:
    """A ``torch.cpu._is_*_supported`` query; False where this torch build lacks it."""
    query = getattr(torch.cpu, name, None)
    return bool(query()) if query is not None else False


@functools.cache
def cpu_has_native_bf16() -> bool:
    """True when oneDNN runs bf16 matmuls on native instructions on this CPU.

    On x86 that means AVX-512 BF16 or AMX tiles: ``torch.ops.mkldnn._is_mkldnn_bf16_supported``
    alone also says yes on plain AVX-512 CPUs, which emulate bf16 (typically no faster than fp32).
    On Arm that oneDNN query checks the BF16 extension itself.
    """
    if not torch.backends.mkldnn.is_available():
        return False
    if platform.machine().lower() in _X86:
        return _torch_cpu_query("_is_avx512_bf16_supported") or _torch_cpu_query("_is_amx_tile_supported")
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def native_bf16(device: torch.device) -> bool:
    """Whether ``device`` computes bf16 natively (emulated bf16 counts as no)."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported(including_emulation=False)
    if device.type == "cpu":
        return cpu_has_native_bf16()
    return False


def check_precision(precision: str) -> str:
    """``precision`` itself if it names a setting; otherwise a ValueError listing the valid ones."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; valid: {', '.join(PRECISIONS)}")
    return precision


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype of a ``precision`` setting on ``device``; None means plain fp32."""
    if check_precision(precision) == "auto":
        return torch.bfloat16 if native_bf16(device) else None
    return _DTYPES[precision]


def autocast(device: torch.device, dtype: torch.dtype | None) -> torch.autocast:
    """``torch.autocast`` to ``dtype`` on ``device``'s type, disabled when ``dtype`` is None."""
    return torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None)
