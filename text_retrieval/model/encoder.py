"""A text encoder: any Hugging Face ``AutoModel`` + pooling + a similarity head that travels with it.

The head is an attribute (``encoder.head``) and is never applied inside :meth:`TextEncoder.embed`
or :meth:`TextEncoder.encode`: stored embeddings stay raw so their norms remain observable, and the
same vectors can be scored under any head. Scoring code calls ``head.transform_query`` /
``head.transform_document`` (or ``head.score``) itself.

``save_pretrained`` writes the HF model and tokenizer, ``clipmag_head.json`` (the ``HeadRecord``:
head, pooling, prefixes, max lengths) and a sentence-transformers pipeline whose ``encode_query`` /
``encode_document`` / ``similarity`` give the head's scores (``text_retrieval/model/st_export.py``).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm
from transformers import AutoTokenizer, BatchEncoding, PreTrainedModel, PreTrainedTokenizerBase

from clipmag.runtime.precision import autocast, autocast_dtype
from clipmag.runtime.precision_setting import check_precision
from clipmag.scoring.head_record import HEAD_FILE, HeadRecord
from clipmag.scoring.heads import SimilarityHead, build_head
from clipmag.storage.finite import require_finite
from text_retrieval.model.hf_files import append_eos
from text_retrieval.model.packaged import resolve_model_name
from text_retrieval.model.pooling import (
    POOLINGS,
    VOCABULARY_LOGITS_BUDGET,
    VOCABULARY_POOLINGS,
    load_model,
    pool,
    splade_pool,
)
from text_retrieval.model.source import check_text_model_source
from text_retrieval.model.st_config import sentence_transformers_config

logger = logging.getLogger("clipmag")

__all__ = ["TextEncoder", "HEAD_FILE"]

Side = Literal["query", "document"]
DEFAULT_MAX_LENGTH = 512
_OVERRIDES = (
    "query_prefix",
    "document_prefix",
    "query_max_length",
    "document_max_length",
    "max_length",
    "head_settings",
)
_TRAINING_LENGTHS = ("training_query_max_length", "training_document_max_length")


class TextEncoder(nn.Module):
    """HF transformer + pooling, with per-side prefixes and max lengths, and a similarity head."""

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        head: SimilarityHead | None = None,
        pooling: str = "mean",
        query_prefix: str = "",
        document_prefix: str = "",
        query_max_length: int = DEFAULT_MAX_LENGTH,
        document_max_length: int = DEFAULT_MAX_LENGTH,
        name_or_path: str = "",
        precision: str = "auto",
    ) -> None:
        super().__init__()
        if pooling not in POOLINGS:
            raise ValueError(f"unknown pooling {pooling!r}; valid: {', '.join(POOLINGS)}")
        self.model = model
        self.tokenizer = tokenizer
        self.head = head if head is not None else build_head("cosine")
        self.pooling = pooling
        self.query_prefix, self.document_prefix = query_prefix, document_prefix
        self.query_max_length, self.document_max_length = int(query_max_length), int(document_max_length)
        self.name_or_path = name_or_path or str(getattr(model.config, "_name_or_path", ""))
        self.precision = check_precision(precision)  # what encode() computes in; training: train.precision
        # the training lengths of a loaded export's record, carried into head_record() (a trainer sets its own)
        self.training_lengths: dict[str, int | None] = {}
        self.random_init_seed: int | None = None  # set by from_pretrained for a random start
        if tokenizer.pad_token is None:
            # decoder models (e.g. Qwen3) often ship without one; the mask hides it anyway
            tokenizer.pad_token = tokenizer.eos_token
        if pooling == "last" and append_eos(tokenizer):
            logger.info("last-token pooling: appending %r to every text (the tokenizer adds none)", tokenizer.eos_token)

    # ------------------------------------------------------------------ loading
    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str | Path,
        norm: str | None = None,
        pooling: str | None = None,
        head: SimilarityHead | None = None,
        random_init_seed: int | None = None,
        precision: str = "auto",
        dropout: float | None = None,
        **overrides: Any,
    ) -> TextEncoder:
        """Load a Hugging Face model (folder or hub name) or a clipmag export.

        Settings come, in increasing priority, from: defaults (mean pooling, max length min(tokenizer
        limit, 512)), the model's sentence-transformers config (folder or hub; with the head it computes,
        or cosine for a plain HF model: ``text_retrieval/model/st_config.py``), the folder's ``HeadRecord``
        (``clipmag_head.json``), then the arguments. ``head`` is a ready-built head
        (a trainer passes the one it configured; it is used as is); ``norm`` names a head instead.
        ``overrides`` accepts ``query_prefix``, ``document_prefix``, ``query_max_length``,
        ``document_max_length``, ``max_length`` (both sides), ``head_settings`` (e.g.
        ``{"gq": 0.3}`` for the learnable head) and ``model_kwargs`` (for ``AutoModel``).
        ``random_init_seed`` keeps the architecture and tokenizer but draws fresh weights with that
        seed (in a forked RNG, so the caller's random state is untouched and every rank agrees).
        ``dropout`` replaces every dropout probability of the model's config (``None``: its own).
        ``precision``: what :meth:`encode` computes in (``auto``: bf16 where native; ``clipmag.runtime.precision``).
        """
        model_kwargs = dict(overrides.pop("model_kwargs", None) or {})
        unknown = set(overrides) - set(_OVERRIDES)
        if unknown:
            raise TypeError(
                f"TextEncoder.from_pretrained: unknown setting(s) {sorted(unknown)}; valid: {', '.join(_OVERRIDES)}"
            )
        source = resolve_model_name(str(name_or_path))
        check_text_model_source(source)
        folder = Path(source)
        tokenizer = AutoTokenizer.from_pretrained(source)
        limit = getattr(tokenizer, "model_max_length", DEFAULT_MAX_LENGTH) or DEFAULT_MAX_LENGTH
        length = min(int(limit), DEFAULT_MAX_LENGTH)
        settings: dict[str, Any] = {"pooling": "mean", "query_prefix": "", "document_prefix": ""}
        settings.update(query_max_length=length, document_max_length=length)
        head_dict: dict[str, Any] = {"name": "cosine"}
        training: dict[str, int | None] = {}
        st_config = sentence_transformers_config(source)
        settings.update(st_config.settings)
        st_config.warn_unapplied()
        if HeadRecord.exists(folder):
            record = HeadRecord.read(folder)
            head_dict = record.head
            saved = record.to_dict()
            settings.update({k: saved[k] for k in settings if saved.get(k) is not None})
            training = {k: saved[k] for k in _TRAINING_LENGTHS}
        elif head is None and norm is None:
            head_dict = st_config.declared_head()
        if "max_length" in overrides:
            overrides["query_max_length"] = overrides["document_max_length"] = overrides.pop("max_length")
        head_settings = overrides.pop("head_settings", None)
        settings.update({k: v for k, v in overrides.items() if v is not None})
        if pooling is not None:
            settings["pooling"] = pooling
        model = load_model(source, settings["pooling"], random_init_seed, model_kwargs, dropout)
        if head is None:
            if norm is not None and norm != head_dict.get("name"):
                head_dict = {"name": norm}
            head = build_head({**head_dict, **(head_settings or {})})
        lengths = f"{settings['query_max_length']}/{settings['document_max_length']}"
        logger.info("loaded %s: pooling=%s head=%s max_length=%s", source, settings["pooling"], head.name, lengths)
        encoder = cls(model, tokenizer, head=head, name_or_path=source, precision=precision, **settings)
        encoder.training_lengths = training
        encoder.random_init_seed = random_init_seed
        return encoder

    # ------------------------------------------------------------------ properties
    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def dim(self) -> int:
        """Embedding width: the hidden size, or the vocabulary size for SPLADE's term weights."""
        if self.pooling in VOCABULARY_POOLINGS:
            return int(self.model.config.vocab_size)
        return int(self.model.config.hidden_size)

    def side_settings(self, side: Side) -> tuple[str, int]:
        if side == "query":
            return self.query_prefix, self.query_max_length
        if side == "document":
            return self.document_prefix, self.document_max_length
        raise ValueError(f"side must be 'query' or 'document', got {side!r}")

    def head_record(self) -> HeadRecord:
        """Everything besides the weights that determines the embeddings and scores."""
        return HeadRecord(
            head=self.head.to_dict(),
            pooling=self.pooling,
            query_prefix=self.query_prefix,
            document_prefix=self.document_prefix,
            query_max_length=self.query_max_length,
            document_max_length=self.document_max_length,
            model_name=self.name_or_path,
            random_init_seed=self.random_init_seed,
            **self.training_lengths,
        )

    def weights_fingerprint(self) -> str:
        """Cheap digest of the weights (a strided sample of every tensor): changes when training does."""
        digest = hashlib.sha1()
        with torch.no_grad():
            for name, tensor in self.model.state_dict().items():
                flat = tensor.detach().reshape(-1)
                step = max(1, flat.numel() // 256)
                digest.update(name.encode() + flat[::step].to("cpu", torch.float32).numpy().tobytes())
        return digest.hexdigest()[:16]

    # ------------------------------------------------------------------ encoding
    def tokenize(self, texts: Sequence[str], side: Side) -> BatchEncoding:
        """Tokenize with the side's prefix and max length, padded to the longest text."""
        prefix, max_length = self.side_settings(side)
        return self.tokenizer(
            [prefix + t for t in texts], padding=True, truncation=True, max_length=max_length, return_tensors="pt"
        )

    def embed(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Raw pooled embeddings [N, D] (with gradient; no head applied)."""
        inputs = {k: v for k, v in batch.items() if v is not None}
        output = self.model(**inputs)
        if self.pooling in VOCABULARY_POOLINGS:
            return splade_pool(output.logits, inputs["attention_mask"])
        return pool(output.last_hidden_state, inputs["attention_mask"], self.pooling)

    forward = embed

    def _pad(self, features: list[dict[str, list[int]]]) -> dict[str, torch.Tensor]:
        longest = max(len(f["input_ids"]) for f in features)
        left = self.tokenizer.padding_side == "left"
        fill = {"input_ids": self.tokenizer.pad_token_id, "attention_mask": 0}
        batch: dict[str, torch.Tensor] = {}
        for key in features[0]:
            rows = []
            for f in features:
                pad = [fill.get(key, 0)] * (longest - len(f[key]))
                rows.append(pad + f[key] if left else f[key] + pad)
            batch[key] = torch.tensor(rows, dtype=torch.long)
        return batch

    @torch.no_grad()  # not inference_mode: autocast caches the bf16 weights only outside it
    def encode(self, texts: Sequence[str], side: Side, batch_size: int = 64, show_progress: bool = True) -> np.ndarray:
        """Raw embeddings [N, D] float32, in input order.

        Texts are tokenized once, sorted longest first (so batches hold similar lengths and an
        out-of-memory shows up on the first batch), padded per batch, and put back in input order.
        Matmuls run in ``self.precision`` (``auto``: bf16 autocast where native); pooling stays fp32.
        SPLADE pooling makes [batch, length, vocabulary] logits, so its batches are cut to keep them
        within ``VOCABULARY_LOGITS_BUDGET`` (the longest text sets the size).
        """
        if isinstance(texts, str):
            raise TypeError("encode expects a list of texts, got a single string")
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        prefix, max_length = self.side_settings(side)
        tokens = self.tokenizer([prefix + t for t in texts], truncation=True, max_length=max_length)
        keys = [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in tokens]
        order = np.argsort([-len(ids) for ids in tokens["input_ids"]], kind="stable")
        was_training = self.model.training
        self.model.eval()
        device = self.device
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        if self.pooling in VOCABULARY_POOLINGS:  # [batch, length, vocabulary] logits: bound their size
            longest = max(len(ids) for ids in tokens["input_ids"])
            batch_size = max(1, min(batch_size, VOCABULARY_LOGITS_BUDGET // (longest * self.dim)))
        starts = range(0, len(texts), batch_size)
        try:  # one autocast region for all batches, so the weights are cast once
            with autocast(device, autocast_dtype(self.precision, device)):
                for start in tqdm(starts, desc=f"encode {side} texts", disable=not show_progress, unit="batch"):
                    index = order[start : start + batch_size]
                    batch = self._pad([{k: tokens[k][i] for k in keys} for i in index])
                    out[index] = self.embed({k: v.to(device) for k, v in batch.items()}).float().cpu().numpy()
        finally:
            self.model.train(was_training)
        return out

    def gradient_checkpointing_enable(self, **kwargs: Any) -> None:
        self.model.gradient_checkpointing_enable(**kwargs)

    # ------------------------------------------------------------------ saving
    def save_pretrained(self, directory: str | Path, record: HeadRecord | None = None) -> None:
        """HF model + tokenizer + ``clipmag_head.json`` + the head as a sentence-transformers pipeline.

        ``record`` is the trainer's fuller record (with the loss direction and scale); by default
        the encoder's own. The sentence-transformers files and the model card come from
        ``text_retrieval.model.st_export`` and ``.card`` (imported here: sentence-transformers is slow).
        """
        from text_retrieval.model import card, st_export

        directory = Path(directory)
        require_finite(self.model.state_dict(), str(directory))
        directory.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(directory)
        self.tokenizer.save_pretrained(directory)
        record = record or self.head_record()
        record.write(directory)
        st_export.save_sentence_transformers(directory, record, self.dim)
        card.write_model_card(directory, record)
