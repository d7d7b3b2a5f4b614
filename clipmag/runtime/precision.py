"""Which number format matmuls run in: fp32, or bf16 / fp16 autocast over fp32 weights.

``auto`` takes bf16 autocast wherever the hardware computes bf16 natively - a CUDA GPU with bf16
units, or a CPU with AVX-512 BF16 or AMX, where oneDNN runs bf16 matmuls at up to twice the fp32
rate - and fp32 everywhere else, because a CPU without those instructions emulates bf16, which
costs accuracy and is typically no faster. The hardware is asked through torch's own capability
queries (``torch.cpu._is_*_supported``, ``torch.cuda.is_bf16_supported``), not a list of models.

Autocast changes only the dtype that matmuls, convolutions and attention compute in: weights,
gradients and optimizer state stay fp32 (master weights), and the similarity heads and losses
switch autocast off and compute in fp32 (``clipmag.scoring.heads``).

One kernel choice rides with the precision: torch's CPU flash-attention kernel runs its bf16
*backward* several times slower than its math kernel on short sequences (up to 128 tokens on the
CPUs measured: 5x at CLIP-tiny's 17-20 tokens, 2x at ViT-B/32's 50 and CLIP text's 77, and slower
than flash from 256), while its forward alone is faster; so a training forward under CPU bf16
autocast over short sequences asks for the math kernel (:func:`training_attention`).
"""

from __future__ import annotations

import contextlib
import functools
import platform

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from clipmag.runtime.precision_setting import check_precision

__all__ = [
    "MATH_ATTENTION_MAX_TOKENS",
    "autocast",
    "autocast_dtype",
    "cpu_has_native_bf16",
    "native_bf16",
    "training_attention",
]

_DTYPES: dict[str, torch.dtype | None] = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}
_X86 = ("x86_64", "amd64", "i386", "i686")
# The longest sequence whose bf16 attention trains faster with torch's math kernel than its CPU
# flash kernel (forward + backward, measured at 17 to 256 tokens; flash wins from 256).
MATH_ATTENTION_MAX_TOKENS = 128


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


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype of a ``precision`` setting on ``device``; None means plain fp32."""
    if check_precision(precision) == "auto":
        return torch.bfloat16 if native_bf16(device) else None
    return _DTYPES[precision]


def autocast(device: torch.device, dtype: torch.dtype | None) -> torch.autocast:
    """``torch.autocast`` to ``dtype`` on ``device``'s type, disabled when ``dtype`` is None."""
    return torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None)


def training_attention(max_tokens: int | None) -> contextlib.AbstractContextManager:
    """Torch's math attention kernel for a forward that records gradients under CPU bf16 autocast
    over sequences of at most :data:`MATH_ATTENTION_MAX_TOKENS` (``max_tokens``; None: unknown, no
    choice made); torch's own choice everywhere else (the module docstring says why). The math
    kernel's results differ from flash's by bf16 rounding only."""
    short = max_tokens is not None and max_tokens <= MATH_ATTENTION_MAX_TOKENS
    cpu_bf16 = torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16
    if short and cpu_bf16 and torch.is_grad_enabled():
        return sdpa_kernel([SDPBackend.MATH])
    return contextlib.nullcontext()
