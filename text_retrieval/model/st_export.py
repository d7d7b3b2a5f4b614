"""The sentence-transformers side of a text export: the head as an asymmetric pipeline, and a model card.

Every head scores ``s(q, d) = (q / |q|^gq) . (d / |d|^gd)``, so a sentence-transformers model
reproduces it exactly when ``encode_query`` ends in the query-side transform, ``encode_document``
in the document-side transform, and ``similarity`` is a dot product. The pipeline is built from
sentence-transformers' own module classes and written by its own ``save_pretrained``:

* equal exponents need no routing: ``[Transformer, Pooling]`` with ``similarity_fn_name`` ``cosine``
  (g = 1, embeddings stay raw) or ``dot`` (g = 0); a learnable head with equal exponents strictly
  between adds ``NormPower(g)``;
* unequal exponents (qnorm, dnorm, learnable) use a ``Router`` after the Transformer: query route
  ``[Pooling, transform(gq)]``, document route ``[Pooling, transform(gd)]`` (one Pooling, saved
  once), where transform(1) is ``Normalize``, transform(0) nothing, anything between ``NormPower``.

The fixed heads thus load with sentence-transformers alone; only a learnable head needs clipmag
(``text_retrieval.st_modules``, loaded with ``trust_remote_code=True``: sentence-transformers 6
imports no class outside its own package without it; docs/text.md says what else the flag allows). Prefixes become the
``query`` / ``document`` prompts and the record's inference lengths (for a trained export, the
lengths its run's test encoded at) the Transformer's ``query_length`` / ``document_length``. Plain
``encode()`` takes the document route: the Router's default route, the ``document`` prompt as the
default prompt, and the document length as ``max_seq_length``. The model card
(:mod:`text_retrieval.model.card`) gives the inference and the training lengths.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

from clipmag.scoring.head_record import HeadRecord
from clipmag.scoring.heads import build_head

logger = logging.getLogger("clipmag")

__all__ = ["save_sentence_transformers", "plain_similarity", "ST_POOLING", "SPARSE_POOLINGS"]

ST_POOLING = {"mean": "mean", "cls": "cls", "last": "lasttoken"}
SPARSE_POOLINGS = frozenset({"splade"})  # exported as a SparseEncoder
_ST_CONFIG = "sentence_bert_config.json"
_STALE = ("1_Pooling", "1_Router", "1_SpladePooling")  # module folders an earlier export of another head may have left


def _require_sentence_transformers() -> None:
    """sentence-transformers with ``Router`` and per-task Transformer lengths (6.x), else a clear error."""
    import inspect

    import sentence_transformers
    from sentence_transformers.base.modules import Transformer

    if "query_length" not in inspect.signature(Transformer.__init__).parameters:
        raise ImportError(
            f"the sentence-transformers export needs sentence-transformers >= 6.2 (Router and per-side max "
            f"lengths); installed: {sentence_transformers.__version__}"
        )


def _side_modules(gamma: float) -> list[Any]:
    from sentence_transformers.base.modules import Normalize

    from text_retrieval.st_modules import NormPower

    if gamma == 0.0:
        return []
    return [Normalize()] if gamma == 1.0 else [NormPower(gamma)]


def plain_similarity(gq: float, gd: float) -> bool:
    """Whether a plain similarity function scores the head exactly: cosine (1, 1) or dot (0, 0)."""
    return gq == gd and gq in (0.0, 1.0)


def _sparse_pipeline(transformer: Any, gq: float, gd: float, directory: Path) -> tuple[list[Any], str]:
    """SPLADE as sentence-transformers' ``SparseEncoder``: ``[Transformer(fill-mask), SpladePooling]``.

    Its similarity is the dot product (the head SPLADE is trained with) or cosine; any other head
    needs per-side scaling that sentence-transformers' sparse pipeline does not do, so the user must
    apply it (the warning and the model card say how)."""
    from sentence_transformers.sparse_encoder.modules import SpladePooling

    if not plain_similarity(gq, gd):
        logger.warning(
            "%s: sentence-transformers' SparseEncoder scores SPLADE vectors with dot or cosine only; this head "
            "needs the query divided by |q|^%g and the document by |d|^%g before the dot product "
            "(or load it with clipmag's TextEncoder, which applies the head)",
            directory,
            gq,
            gd,
        )
    return [transformer, SpladePooling(pooling_strategy="max", activation_function="relu")], (
        "cosine" if gq == gd == 1.0 else "dot"
    )


def _pipeline(directory: Path, record: HeadRecord, dim: int) -> tuple[list[Any], str]:
    """The modules after the HF model folder in ``directory``, and the similarity function name."""
    from sentence_transformers.base.modules import Router, Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    sparse = record.pooling in SPARSE_POOLINGS
    transformer = Transformer(
        str(directory),
        query_length=record.query_max_length,
        document_length=record.document_max_length,
        **({"transformer_task": "fill-mask"} if sparse else {}),
    )
    if sparse:
        return _sparse_pipeline(transformer, *build_head(record).gammas(), directory)
    pooling = Pooling(dim, ST_POOLING[record.pooling or "mean"], include_prompt=True)
    gq, gd = build_head(record).gammas()
    if plain_similarity(gq, gd):
        return [transformer, pooling], "cosine" if gq == 1.0 else "dot"
    if not {gq, gd} <= {0.0, 1.0}:
        logger.warning(
            "%s: the learned exponents need clipmag's NormPower module; sentence-transformers loads this export "
            "with clipmag installed and trust_remote_code=True",
            directory,
        )
    if gq == gd:
        return [transformer, pooling, *_side_modules(gq)], "dot"
    router = Router.for_query_document(
        query_modules=[pooling, *_side_modules(gq)], document_modules=[pooling, *_side_modules(gd)]
    )
    return [transformer, router], "dot"


def save_sentence_transformers(directory: str | Path, record: HeadRecord, dim: int) -> None:
    """Write the sentence-transformers files for the HF model and tokenizer already in ``directory``.

    sentence-transformers' Transformer module loads the folder (so its files are the ones its own
    ``save_pretrained`` writes; the weights are written back unchanged) and the head becomes the
    pipeline in the module docstring; the model card (:mod:`text_retrieval.model.card`) describes it.
    """
    _require_sentence_transformers()
    from sentence_transformers import SentenceTransformer, SparseEncoder

    directory = Path(directory)
    for stale in _STALE:
        shutil.rmtree(directory / stale, ignore_errors=True)
    modules, similarity = _pipeline(directory, record, dim)
    prompts = {"query": record.query_prefix or "", "document": record.document_prefix or ""}
    model_class = SparseEncoder if record.pooling in SPARSE_POOLINGS else SentenceTransformer
    model = model_class(
        modules=modules,
        device="cpu",
        similarity_fn_name=similarity,
        prompts=prompts,
        default_prompt_name="document" if prompts["document"] else None,
    )
    model.save_pretrained(str(directory), create_model_card=False)
    if record.document_max_length:  # plain encode(): the document length (read at load as max_seq_length)
        config_path = directory / _ST_CONFIG
        config = json.loads(config_path.read_text(encoding="utf-8"))
        config["max_seq_length"] = int(record.document_max_length)
        config_path.write_text(json.dumps(config, indent=4) + "\n", encoding="utf-8")
