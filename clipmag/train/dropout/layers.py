"""Dropout: the one random draw of a training step, and therefore what a world size can change.

The data of a step is the same on any number of ranks (every rank takes its slice of one global
batch: ``clipmag.train.batching``, ``clipmag.storage.shard_stream``), and so is its arithmetic up
to the order of fp32 reductions. Dropout is not: every rank draws its masks from its own generator
(seeded ``train.seed + rank``, as open_clip does), so a run repeated or resumed on another number
of ranks draws other masks and trains on other losses. ``model.dropout`` (both front ends) sets the
probability of every dropout in the model; 0 turns them off, and then the world size changes
nothing but the reduction order. A resume on another number of ranks with dropout on says so in
one line (:func:`resumed_rng_state`).

What counts as dropout: torch's dropout layers, the attention dropout of ``nn.MultiheadAttention``
(open_clip's own towers have no other) and the ``attention_dropout`` number that Hugging Face
decoders (Llama, Qwen, Mistral, ...) keep on their attention layers and read at every forward pass.
Layers that drop patches or paths at random (open_clip's patch dropout, stochastic depth) are seen
by their class names but set by the architecture, not by ``model.dropout``.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from clipmag.errors import ConfigError
from clipmag.runtime.distributed import DistributedContext
from clipmag.runtime.logs import logger
from clipmag.train.checkpoint import files as ckpt_io

DROPOUT_LAYERS = (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout, nn.FeatureAlphaDropout)
RANDOM_DROP_NAMES = ("PatchDropout", "DropPath")  # class names of layers that drop patches or paths
RATE_ATTRIBUTES = ("p", "prob", "drop_prob")  # where those keep their probability


def config_dropouts(config: Any) -> dict[str, float]:
    """The dropout probabilities of a Hugging Face model config: its numbers whose names say so
    (``hidden_dropout_prob``, ``attention_probs_dropout_prob``, ``attention_dropout``, GPT-2's
    ``resid_pdrop``, ...); ``classifier_dropout: null`` and the like are left out."""
    return {
        name: float(value)
        for name, value in config.to_dict().items()
        if ("dropout" in name or name.endswith("pdrop")) and isinstance(value, (int, float))
        if not isinstance(value, bool)
    }


def dropout_overrides(config: Any, p: float | None, what: str) -> dict[str, float]:
    """``model.dropout`` as settings of ``config`` (every dropout probability it has set to ``p``);
    none for ``p=None`` (the model's own). A model with no dropout to set refuses a ``p`` above 0."""
    if p is None:
        return {}
    found = config_dropouts(config)
    if not found and p > 0:
        raise ConfigError(f"model.dropout={p}: {what} has no dropout probability in its config to set; drop the key")
    return dict.fromkeys(found, p)


def _attention_rate(module: nn.Module) -> float | None:
    """The dropout probability a layer applies inside its attention, where it keeps one as a number."""
    if isinstance(module, nn.MultiheadAttention):
        return float(module.dropout)
    rate = getattr(module, "attention_dropout", None)
    return float(rate) if isinstance(rate, (int, float)) and not isinstance(rate, bool) else None


def _layer_rate(module: nn.Module) -> float:
    if isinstance(module, DROPOUT_LAYERS) or type(module).__name__ in RANDOM_DROP_NAMES:
        return next((float(getattr(module, a)) for a in RATE_ATTRIBUTES if hasattr(module, a)), 0.0)
    return _attention_rate(module) or 0.0


def active_dropout(model: nn.Module) -> list[str]:
    """What in ``model`` draws at random in training, as ``name (p=...)`` (empty: nothing does)."""
    rates = ((name or type(module).__name__, _layer_rate(module)) for name, module in model.named_modules())
    return [f"{name} (p={rate:g})" for name, rate in rates if rate > 0]


def check_dropout_off(model: nn.Module, p: float | None, what: str) -> None:
    """With ``model.dropout=0``, refuse a model that still drops at random (``model.dropout`` does not
    reach it: patch dropout, stochastic depth, a layer of a kind not known here)."""
    left = active_dropout(model) if p == 0 else []
    if left:
        shown = "; ".join(left[:3]) + (f" and {len(left) - 3} more" if len(left) > 3 else "")
        raise ConfigError(
            f"model.dropout=0: {what} still drops at random ({shown}), which model.dropout does not set; "
            "turn it off in the model's own configuration"
        )


def set_layer_dropout(model: nn.Module, p: float | None, what: str) -> None:
    """Give every dropout layer of ``model`` and every attention dropout it keeps as a number
    probability ``p``; ``None`` keeps the model's own. Refuses a ``p`` above 0 for a model with
    nothing to set, and ``p=0`` when a random drop remains (:func:`check_dropout_off`)."""
    if p is None:
        return
    layers = [m for m in model.modules() if isinstance(m, DROPOUT_LAYERS) or _attention_rate(m) is not None]
    if not layers and p > 0:
        raise ConfigError(f"model.dropout={p}: {what} has no dropout layer to set; drop the key")
    for layer in layers:
        if isinstance(layer, DROPOUT_LAYERS):
            layer.p = p
        elif isinstance(layer, nn.MultiheadAttention):
            layer.dropout = p
        else:
            layer.attention_dropout = p
    check_dropout_off(model, p, what)


def resumed_rng_state(saved: Any, ctx: DistributedContext, model: nn.Module) -> dict[str, Any]:
    """This rank's RNG state from a checkpoint's (``ckpt_io.rank_rng_state``). On another number of
    ranks than the checkpoint's, rank 0 says in one line whether the run stays the same: with
    dropout off it does (the same batches, the same steps); with dropout on, the masks differ."""
    if isinstance(saved, list) and len(saved) != ctx.world_size and ctx.is_main:
        drops = active_dropout(model)
        change = f"resuming on {ctx.world_size} rank(s) a checkpoint of {len(saved)}"
        if drops:
            logger.warning(
                "%s: the same batches, but dropout draws its masks per rank (%s%s), so the losses will differ "
                "from the uninterrupted run's; model.dropout=0 makes them equal",
                change,
                ", ".join(drops[:2]),
                f" and {len(drops) - 2} more" if len(drops) > 2 else "",
            )
        else:
            logger.info("%s: no dropout, so the same batches and the same steps as the uninterrupted run", change)
    return ckpt_io.rank_rng_state(saved, ctx.rank)
