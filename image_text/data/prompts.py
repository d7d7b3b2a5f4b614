"""Zero-shot prompts: the texts a class is scored by. Torch-free, so the shard builder can check its
training texts against them without loading a model."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["zero_shot_prompts"]


def zero_shot_prompts(classnames: Sequence[str], templates: Sequence[str]) -> list[str]:
    """Every template filled with every class name, class-major (``{c}`` or ``{}`` marks the slot)."""
    return [t.replace("{c}", name).replace("{}", name) for name in classnames for t in templates]
