"""What a text encoder's folder and tokenizer need besides the weights, kept out of ``encoder.py``.

* a JSON file of a model folder or hub repository (what ``text_retrieval/model/st_config.py`` reads
  a sentence-transformers model's settings from);
* the end-of-sequence token that last-token pooling of a decoder LM wants: in a causal model only
  the last position sees the whole text, and pooling it works best when it is the same token for
  every text (Qwen3-Embedding and E5-Mistral append EOS for this reason), yet most decoder
  tokenizers (Qwen2/3, LLaMA) add none.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import huggingface_hub
from huggingface_hub.errors import EntryNotFoundError
from tokenizers import processors
from transformers import PreTrainedTokenizerBase

__all__ = ["model_file", "append_eos"]


def _read_json(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON ({err})") from None


def model_file(source: str | Path, name: str) -> Any:
    """A JSON file of a model folder or hub repository (through the cache, like the weights), or None."""
    if Path(source).is_dir():
        path = Path(source) / name
        return _read_json(path) if path.is_file() else None
    try:
        return _read_json(Path(huggingface_hub.hf_hub_download(str(source), name)))
    except (EntryNotFoundError, OSError, ValueError):  # absent, not cached while offline, not a repo id
        return None


def append_eos(tokenizer: PreTrainedTokenizerBase) -> bool:
    """Make the tokenizer end every text with its EOS token unless it already does; True if changed.

    The token is added by the fast tokenizer's post-processor, so truncation keeps room for it,
    every tokenizing path (training batches, ``encode``) gets it, and a saved tokenizer carries it
    (``SentenceTransformer`` loading an export sees the same tokens). A tokenizer without an EOS
    token (BERT's ends in [SEP]) is left as it is.
    """
    eos, eos_id = tokenizer.eos_token, tokenizer.eos_token_id
    if eos_id is None or tokenizer("a")["input_ids"][-1:] == [eos_id]:
        return False
    if not tokenizer.is_fast:
        raise ValueError(
            f"last-token pooling needs {eos!r} appended to every text, which needs a fast tokenizer; "
            f"{type(tokenizer).__name__} is not one (install the model's tokenizer.json)"
        )
    backend = tokenizer.backend_tokenizer
    template = processors.TemplateProcessing(
        single=f"$A {eos}", pair=f"$A {eos} $B:1 {eos}:1", special_tokens=[(eos, eos_id)]
    )
    current = backend.post_processor
    backend.post_processor = template if current is None else processors.Sequence([current, template])
    return True
