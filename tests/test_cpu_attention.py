"""The attention kernel a training forward asks for under CPU bf16 autocast: torch's math kernel
for short sequences that record gradients (its backward is several times faster there than the
CPU flash kernel's), torch's own choice everywhere else; and CLIP towers trained with it give the
gradients of fp32 within bf16's tolerance."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from clipmag.runtime.precision import MATH_ATTENTION_MAX_TOKENS, training_attention
from clipmag.scoring.heads import build_head
from clipmag.scoring.losses import InfoNCE
from image_text.model.architecture import build_open_clip
from image_text.model.clip_model import ClipMagModel
from image_text.model.config import ClipModelConfig

FLASH_BACKWARD = "ScaledDotProductFlashAttentionForCpuBackward0"


def _attention_backward(tokens: int, bf16: bool = True, grad: bool = True, max_tokens: int | None = None) -> str:
    """The name of the autograd node SDPA leaves behind, under the conditions given."""
    q, k, v = (torch.randn(2, 2, tokens, 8, requires_grad=grad) for _ in range(3))
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16), torch.set_grad_enabled(grad):
        with training_attention(tokens if max_tokens is None else max_tokens):
            out = F.scaled_dot_product_attention(q, k, v)
    return type(out.grad_fn).__name__ if out.grad_fn is not None else "none"


def test_short_bf16_training_attention_runs_the_math_kernel():
    assert _attention_backward(20) != FLASH_BACKWARD
    assert _attention_backward(MATH_ATTENTION_MAX_TOKENS) != FLASH_BACKWARD


@pytest.mark.parametrize(
    "conditions",
    [
        {"tokens": MATH_ATTENTION_MAX_TOKENS + 1},  # long sequences: flash trains faster
        {"tokens": 20, "bf16": False},  # fp32: flash is the faster kernel
    ],
)
def test_elsewhere_torch_keeps_its_flash_kernel(conditions):
    assert _attention_backward(**conditions) == FLASH_BACKWARD


def test_no_choice_without_gradients_or_a_known_length():
    with torch.autocast("cpu", dtype=torch.bfloat16), torch.no_grad():
        assert isinstance(training_attention(20), type(training_attention(None)))
    assert _attention_backward(20, max_tokens=None) != FLASH_BACKWARD  # the length given is the one used
    with torch.autocast("cpu", dtype=torch.bfloat16):
        with training_attention(None):
            q = torch.randn(2, 2, 20, 8, requires_grad=True)
            assert type(F.scaled_dot_product_attention(q, q, q).grad_fn).__name__ == FLASH_BACKWARD


def _gradients(model: ClipMagModel, batch: tuple[torch.Tensor, torch.Tensor], bf16: bool) -> torch.Tensor:
    model.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        loss = model(batch)["loss"]
    loss.backward()
    return torch.cat([p.grad.flatten() for p in model.clip.parameters() if p.grad is not None])


def test_clip_towers_trained_with_the_math_kernel_match_fp32_within_bf16_tolerance():
    """Tolerance: the relative L2 error of all gradients against fp32, at most 5e-2 - what bf16
    autocast with torch's flash kernel gives on the same batch, plus a margin."""
    torch.manual_seed(0)
    clip = build_open_clip(ClipModelConfig(name="clipmag-micro"))[0]
    size = clip.visual.image_size
    batch = (torch.randn(16, 3, *size), torch.randint(1, 1000, (16, clip.context_length)))
    fast = ClipMagModel(clip, build_head("dnorm"), InfoNCE(scale=10.0), "image", "clipmag-micro")
    torch_choice = ClipMagModel(clip, build_head("dnorm"), InfoNCE(scale=10.0), "image", "clipmag-micro", False)
    assert fast.attention_lengths == {"image": clip.visual.positional_embedding.shape[0], "text": clip.context_length}
    assert torch_choice.attention_lengths == {"image": None, "text": None}
    reference = _gradients(fast, batch, bf16=False)
    errors = {
        name: float((_gradients(model, batch, bf16=True) - reference).norm() / reference.norm())
        for name, model in (("math", fast), ("flash", torch_choice))
    }
    assert errors["math"] <= 5e-2, errors
    assert errors["flash"] <= 5e-2, errors


@pytest.mark.parametrize("locked", [False, True])
def test_a_locked_tower_keeps_torchs_choice(locked):
    """A frozen tower only runs forward, where the flash kernel is the faster one."""
    torch.manual_seed(0)
    clip = build_open_clip(ClipModelConfig(name="clipmag-micro"))[0]
    clip.visual.requires_grad_(not locked)
    model = ClipMagModel(clip, build_head("cosine"), InfoNCE(scale=10.0), "image", "clipmag-micro")
    flash_allowed = []
    hook = clip.visual.transformer.resblocks[0].attn.register_forward_hook(
        lambda module, args, out: flash_allowed.append(torch.backends.cuda.flash_sdp_enabled())
    )
    with torch.autocast("cpu", dtype=torch.bfloat16):
        model.encode_image(torch.randn(2, 3, *clip.visual.image_size))
    hook.remove()
    assert flash_allowed == [locked]
