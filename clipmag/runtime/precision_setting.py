"""The values a ``precision`` setting takes, apart from the torch code that applies them
(:mod:`clipmag.runtime.precision`), so a tool's config can name them without importing torch."""

from __future__ import annotations

__all__ = ["PRECISIONS", "check_precision"]

PRECISIONS = ("auto", "fp32", "bf16", "fp16")


def check_precision(precision: str) -> str:
    """``precision`` itself if it names a setting; otherwise a ValueError listing the valid ones."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; valid: {', '.join(PRECISIONS)}")
    return precision
