"""The paper's text models at their published sizes, as configuration files in a Hugging Face hub
cache, so ``clipmag-sweep plan`` prices the paper grid on a machine that cannot reach the hub.

A cost plan reads a model's ``config.json`` (its architecture decides the parameters and FLOPs) and
its tokenizer (which only has to fill every text to its configured max length), never its weights.
With the hub, the plan fetches both itself. Without it, this writes them into a cache laid out as
the hub's, which ``HF_HUB_CACHE`` points the plan at:

    python -m clipmag_experiments.dry_run.standin_sizes runs/hub-sizes
    HF_HUB_CACHE=runs/hub-sizes HF_HUB_OFFLINE=1 python scripts/sweep.py plan --config configs/sweeps/paper_text.yaml

The sizes are those of the models' published ``config.json`` files; the BERT models get BERT's own
uncased vocabulary, Qwen3 a small byte-level tokenizer (its 151,936-token embedding is in the config).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from clipmag_experiments.dry_run.standin_models import bert_tokenizer, decoder_tokenizer

__all__ = ["PUBLISHED_SIZES", "write_size_cache"]

BERT_BASE: dict[str, Any] = {
    "model_type": "bert",
    "architectures": ["BertModel"],
    "vocab_size": 30522,
    "hidden_size": 768,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
    "max_position_embeddings": 512,
    "type_vocab_size": 2,
}
QWEN3_8B: dict[str, Any] = {
    "model_type": "qwen3",
    "architectures": ["Qwen3ForCausalLM"],
    "vocab_size": 151936,
    "hidden_size": 4096,
    "intermediate_size": 12288,
    "num_hidden_layers": 36,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "max_position_embeddings": 32768,
    "rope_theta": 1000000,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": False,
}
PUBLISHED_SIZES = {
    "facebook/contriever": BERT_BASE,
    "Shitao/RetroMAE": BERT_BASE,
    "intfloat/e5-base-unsupervised": BERT_BASE,
    "Qwen/Qwen3-8B-Base": QWEN3_8B,
}


def write_size_cache(cache: str | Path) -> list[str]:
    """Write every model of :data:`PUBLISHED_SIZES` into hub cache ``cache``; returns their names."""
    cache = Path(cache)
    for name, config in PUBLISHED_SIZES.items():
        revision = hashlib.sha1(json.dumps(config, sort_keys=True).encode()).hexdigest()
        repo = cache / f"models--{name.replace('/', '--')}"
        snapshot = repo / "snapshots" / revision
        snapshot.mkdir(parents=True, exist_ok=True)
        tokenizer = bert_tokenizer() if config["model_type"] == "bert" else decoder_tokenizer("<|endoftext|>")
        tokenizer.save_pretrained(snapshot)
        (snapshot / "config.json").write_text(json.dumps(config, indent=1) + "\n", encoding="utf-8")
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / "main").write_text(revision, encoding="utf-8")
    return list(PUBLISHED_SIZES)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m clipmag_experiments.dry_run.standin_sizes CACHE_DIR")
    for model in write_size_cache(sys.argv[1]):
        print(f"{model}: config.json and tokenizer in {sys.argv[1]}")
