"""Evaluation-time encoding: the prefixes and max lengths one evaluation uses, apart from training.

A model keeps the lengths it was trained with (the paper configs train at 64 / 256 tokens) and its
own prefixes. An evaluation with :class:`~text_retrieval.data.EvalSettings` uses instead, per side,
the explicit length if one is set, otherwise the model's own limit capped by ``max_length_cap``,
and the settings' prefix template for the dataset where one is set. The model's own limit is the
``max_seq_length`` of its sentence-transformers config (what ``SentenceTransformer``, and so the
official BRIGHT baselines, use) unless the model is a clipmag export (whose file holds only its
document length), else the tokenizer's ``model_max_length``, else the position embeddings, and
never more than the position embeddings.

A clipmag export records its inference lengths, the ones its run tested at
(:class:`~clipmag.scoring.head_record.HeadRecord`). ``eval_text.py`` encodes at those where no length is
set (:func:`with_export_lengths`), as sentence-transformers and MTEB load the export, so all three
reproduce the run's results. A settings file's unset lengths keep meaning the model's own limit:
the run tested its settings-file sets that way too.

Empty (or whitespace-only) documents and queries are encoded like any other - the model sees its
prefix alone - so scores stay comparable with other evaluations of the same data; but they are
counted, warned about once per dataset with a few ids, and the counts go into the result record.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from clipmag.scoring.head_record import HeadRecord
from text_retrieval.data.loaders import EvalSettings, RetrievalDataset
from text_retrieval.model.encoder import DEFAULT_MAX_LENGTH, TextEncoder
from text_retrieval.model.st_config import sentence_transformers_config

logger = logging.getLogger("clipmag")

__all__ = ["model_length_limit", "with_export_lengths", "evaluation_encoding", "empty_inputs"]

_SIDE_KEYS = ("query_prefix", "document_prefix", "query_max_length", "document_max_length")
_NO_LIMIT = 1_000_000  # tokenizers without a limit report a huge sentinel (1e30)
_SHOWN_IDS = 5
_warned: set[tuple[str, str]] = set()  # (dataset, corpus fingerprint): validation evaluates the same data often


def _declared_length(source: str) -> int | None:
    if HeadRecord.exists(source):
        return None
    return sentence_transformers_config(source).settings.get("document_max_length")


def model_length_limit(encoder: TextEncoder) -> int:
    """The longest input the model itself declares (see the module docstring for the order), never
    beyond its position embeddings (a tokenizer borrowed from a larger model may claim more)."""
    positions = getattr(encoder.model.config, "max_position_embeddings", None)
    tokenizer_limit = getattr(encoder.tokenizer, "model_max_length", None)
    if not (isinstance(tokenizer_limit, int) and 0 < tokenizer_limit < _NO_LIMIT):
        tokenizer_limit = None
    limit = _declared_length(encoder.name_or_path) or tokenizer_limit or positions or DEFAULT_MAX_LENGTH
    return int(min(limit, positions)) if positions else int(limit)


def with_export_lengths(settings: EvalSettings, encoder: TextEncoder) -> EvalSettings:
    """``settings`` whose unset max lengths are, for a clipmag export, its recorded inference lengths
    (capped by ``max_length_cap``); any other model, and a side the record leaves open, keeps the
    model's own limit."""
    if not HeadRecord.exists(encoder.name_or_path):
        return settings
    record = HeadRecord.read(encoder.name_or_path)
    lengths = {}
    for key in ("query_max_length", "document_max_length"):
        recorded = getattr(record, key)
        if getattr(settings, key) is None and recorded is not None:
            lengths[key] = min(recorded, settings.max_length_cap)
    return dataclasses.replace(settings, **lengths)


@contextmanager
def evaluation_encoding(encoder: TextEncoder, settings: EvalSettings | None, task: str) -> Iterator[dict[str, Any]]:
    """Encode with ``settings`` (``{task}`` filled with ``task``) inside the block, the model's own
    settings again after it; yields the prefixes and lengths in use, for the result record."""
    saved = {key: getattr(encoder, key) for key in _SIDE_KEYS}
    used: dict[str, Any] = dict(saved)
    if settings is not None:
        limit = model_length_limit(encoder)
        for side in ("query", "document"):
            prefix = settings.prefix(side, task)
            if prefix is not None:
                used[f"{side}_prefix"] = prefix
            used[f"{side}_max_length"] = getattr(settings, f"{side}_max_length") or min(limit, settings.max_length_cap)
        used.update(model_length_limit=limit, max_length_cap=settings.max_length_cap)
    try:
        for key in _SIDE_KEYS:
            setattr(encoder, key, used[key])
        yield used
    finally:
        for key, value in saved.items():
            setattr(encoder, key, value)


def empty_inputs(dataset: RetrievalDataset) -> dict[str, int]:
    """``{"empty_documents": n, "empty_queries": m}`` for the counts that are not zero, with one
    warning per dataset naming the counts and a few ids (the texts are still encoded)."""
    empty = {
        "documents": [i for i, text in zip(dataset.corpus_ids, dataset.corpus_texts) if not text.strip()],
        "queries": [q for q, text in dataset.queries.items() if not text.strip()],
    }
    found = {side: ids for side, ids in empty.items() if ids}
    key = (dataset.name, dataset.fingerprint)
    if found and key not in _warned:
        _warned.add(key)
        logger.warning(
            "%s: %s are empty or whitespace; they are encoded as they are, so the scores stay comparable",
            dataset.name,
            " and ".join(
                f"{len(ids)} {side} (e.g. {', '.join(map(repr, ids[:_SHOWN_IDS]))})" for side, ids in found.items()
            ),
        )
    return {f"empty_{side}": len(ids) for side, ids in found.items()}
