"""Tiny randomly initialised models in place of the paper's hub models, for dry runs offline.

A dry run must load, train, export and evaluate each config's model the way the real one is
loaded, but cannot fetch ``facebook/contriever`` or ``google/flan-t5-large``. These builders write
Hugging Face folders of the same families, small enough for a CPU:

* :func:`write_tiny_encoder`: a 2-layer, 32-wide BERT (the architecture of Contriever, RetroMAE
  and E5-base) with the uncased WordPiece tokenizer of the packaged all-MiniLM-L6-v2, which is
  BERT's own vocabulary. No head record and no sentence-transformers files, like a hub encoder:
  pooling, prefixes and lengths come from the config that names it, as they do for the real model.
  Weights are drawn wider than BERT's init (std 0.2, not 0.02) and LayerNorm gains and biases away
  from 1 and 0, as a trained model's are: at BERT's init the [CLS] output barely depends on the
  text and every output token has norm sqrt(width), so CLS pooling would give constant norms;
* :func:`write_tiny_reader`: a 2-layer T5 encoder-decoder (Flan-T5's architecture: relative
  positions, no position limit) on the same tokenizer, so the RAG reader path (seq2seq detection,
  right padding, ``max_input_tokens`` beyond 512) runs as it does for Flan-T5;
* :func:`write_tiny_decoder`: a 2-layer Mistral (e5-mistral-7b-instruct's architecture) with a
  byte-level BPE whose tokenizer adds no EOS, as Mistral's does not, so last-token pooling appends
  it; its sentence-transformers files name last-token pooling and 4,096 tokens, as that model's do.
  With ``family="qwen3"`` a 2-layer Qwen3 (Qwen3-Base's architecture), the paper v2's decoder.

Weights are drawn with ``torch.manual_seed(seed)``, so a folder is the same on every build.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = [
    "TINY_WIDTH",
    "bert_tokenizer",
    "decoder_tokenizer",
    "write_tiny_encoder",
    "write_tiny_reader",
    "write_tiny_decoder",
]

TINY_WIDTH = 32


def bert_tokenizer():
    """BERT's uncased WordPiece tokenizer (all-MiniLM-L6-v2's, packaged)."""
    from transformers import AutoTokenizer

    from text_retrieval.model.packaged import resolve_model_name

    return AutoTokenizer.from_pretrained(resolve_model_name("all-MiniLM-L6-v2"))


def write_tiny_encoder(folder: str | Path, seed: int = 0, max_positions: int = 512) -> Path:
    """A 2-layer BERT with BERT's tokenizer in ``folder`` (``max_positions``: Contriever's 512)."""
    import torch
    from transformers import BertConfig, BertModel

    folder = Path(folder)
    tokenizer = bert_tokenizer()
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=TINY_WIDTH,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=2 * TINY_WIDTH,
        max_position_embeddings=max_positions,
        initializer_range=0.2,
    )
    model = BertModel(config)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.weight.uniform_(0.5, 1.5)
                module.bias.normal_(0.0, 0.1)
    model.save_pretrained(folder)
    tokenizer.model_max_length = max_positions
    tokenizer.save_pretrained(folder)
    return folder


def write_tiny_reader(folder: str | Path, seed: int = 0) -> Path:
    """A 2-layer T5 (seq2seq, as Flan-T5) on BERT's tokenizer in ``folder``."""
    import torch
    from transformers import T5Config, T5ForConditionalGeneration

    folder = Path(folder)
    tokenizer = bert_tokenizer()
    torch.manual_seed(seed)
    config = T5Config(
        vocab_size=tokenizer.vocab_size,
        d_model=TINY_WIDTH,
        d_kv=16,
        d_ff=2 * TINY_WIDTH,
        num_layers=2,
        num_heads=2,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.sep_token_id,
        decoder_start_token_id=tokenizer.pad_token_id,
    )
    T5ForConditionalGeneration(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def decoder_tokenizer(eos: str):
    """A byte-level BPE of 600 tokens over the stand-in words, with ``eos`` as its EOS (never added)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from clipmag_experiments.dry_run.standin_training_sets import FILLER, WORDS

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=[eos], initial_alphabet=alphabet)
    bpe.train_from_iterator([" ".join(WORDS + FILLER)] * 4, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token=eos, model_max_length=4096)


def write_tiny_decoder(folder: str | Path, seed: int = 0, family: str = "mistral") -> Path:
    """A 2-layer decoder with a byte-level BPE whose EOS is never added, in ``folder``: ``mistral``
    (EOS ``</s>``, e5-mistral's sentence-transformers files) or ``qwen3`` (EOS ``<|endoftext|>``, a
    base model without them)."""
    import torch
    from transformers import MistralConfig, MistralModel, Qwen3Config, Qwen3Model

    folder = Path(folder)
    tokenizer = decoder_tokenizer("</s>" if family == "mistral" else "<|endoftext|>")
    torch.manual_seed(seed)
    config_class, model_class = (MistralConfig, MistralModel) if family == "mistral" else (Qwen3Config, Qwen3Model)
    config = config_class(
        vocab_size=len(tokenizer),
        hidden_size=TINY_WIDTH,
        intermediate_size=2 * TINY_WIDTH,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        eos_token_id=tokenizer.eos_token_id,
    )
    model_class(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    if family != "mistral":
        return folder
    (folder / "1_Pooling").mkdir(exist_ok=True)
    pooling = {"word_embedding_dimension": TINY_WIDTH, "pooling_mode_lasttoken": True}
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(pooling, indent=1) + "\n")
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 4096}) + "\n")
    return folder
