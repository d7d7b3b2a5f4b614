"""Dropout: which layers drop and with what probability, and a fast kernel for the CPU.

``layers`` sets and checks the dropout of a model (``model.dropout``) and what a resume on another
world size does to its random draws; ``fast`` is dropout drawn from raw random bits, torch's
semantics at a fraction of its RNG cost; ``hf_attention`` puts that kernel into a Hugging Face
transformer's attention. The settings a front end calls are re-exported here.
"""

from clipmag.train.dropout.layers import (
    DROPOUT_LAYERS,
    active_dropout,
    check_dropout_off,
    config_dropouts,
    dropout_overrides,
    resumed_rng_state,
    set_layer_dropout,
)

__all__ = [
    "DROPOUT_LAYERS",
    "active_dropout",
    "check_dropout_off",
    "config_dropouts",
    "dropout_overrides",
    "resumed_rng_state",
    "set_layer_dropout",
]
