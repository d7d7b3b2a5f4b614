"""Which attention kernel a CLIP tower trains with: the towers' sequence lengths for
:func:`clipmag.runtime.precision.training_attention`.

open_clip's towers call torch's ``scaled_dot_product_attention``; under bf16 autocast on the CPU
its flash kernel's backward is several times slower than the math kernel's at CLIP's sequence
lengths (17-77 tokens), so a tower that trains asks for the math kernel. A locked tower only runs
forward, where flash is faster, and keeps torch's choice; so does a tower whose length this module
cannot read (a convolutional or Hugging Face tower).
"""

from __future__ import annotations

import contextlib

from torch import nn

from clipmag.runtime.precision import training_attention


def _length(module: nn.Module | None) -> int | None:
    positions = getattr(module, "positional_embedding", None)
    return None if positions is None else int(positions.shape[0])


def tower_lengths(clip: nn.Module) -> dict[str, int | None]:
    """The sequence length each tower of an open_clip model attends over (None: not known)."""
    return {"image": _length(clip.visual), "text": _length(getattr(clip, "text", clip))}  # CustomTextCLIP / CLIP


def text_tower(clip: nn.Module) -> nn.Module:
    """The module holding the text tower's blocks: ``text`` of a CustomTextCLIP, else ``transformer``."""
    return clip.text if hasattr(clip, "text") else clip.transformer


def tower_attention(tower: nn.Module, length: int | None) -> contextlib.AbstractContextManager:
    """The kernel choice for one forward of ``tower``: the math kernel only for a tower that trains."""
    trains = length is not None and any(p.requires_grad for p in tower.parameters())
    return training_attention(length if trains else None)
