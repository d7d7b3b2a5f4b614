"""What a sentence-transformers folder says about scoring: pooling, max lengths, prompts and the head.

A clipmag export says it in ``clipmag_head.json``, which wins. A folder without one (a third-party
sentence-transformers model, or an export whose record was lost) is read the way
sentence-transformers itself would run it (``modules.json`` and the files it names):

* pooling: its ``Pooling`` module (``pooling_mode``, or the older ``pooling_mode_*_tokens`` flags),
  top level or inside a ``Router`` (``SpladePooling``: ``splade``);
* max lengths: ``sentence_bert_config.json``'s ``max_seq_length``, per side where it also has
  ``query_length`` / ``document_length``;
* prefixes: the ``query`` prompt and the ``document`` (or ``passage`` / ``corpus``) prompt of
  ``config_sentence_transformers.json``, which ``encode_query`` / ``encode_document`` and MTEB apply;
* the head: ``similarity_fn_name`` (absent: ``cosine``, sentence-transformers' default) and what
  each side does after pooling: ``Normalize`` is g = 1, nothing g = 0, clipmag's ``NormPower`` its
  own g, so a dot-product pipeline with a ``Router`` of ``[Pooling, Normalize]`` for queries and
  ``[Pooling]`` for documents is ``qnorm``. A pipeline whose head cannot be read this way (another
  similarity, a route of modules clipmag does not apply) raises :class:`HeadUnreadableError`,
  which tells the user to restore the record or name the head.

A folder with no ``modules.json`` is a plain Hugging Face encoder: it declares no head at all, and
is scored with cosine, the usual default, with a log line saying so
(:meth:`SentenceTransformersConfig.declared_head`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clipmag.scoring.head_record import HEAD_FILE
from text_retrieval.model.hf_files import model_file

logger = logging.getLogger("clipmag")

__all__ = ["HeadUnreadableError", "SentenceTransformersConfig", "sentence_transformers_config"]

_POOLING_MODES = {"mean": "mean", "cls": "cls", "lasttoken": "last"}
_POOLING_FLAGS = {"pooling_mode_mean_tokens": "mean", "pooling_mode_cls_token": "cls", "pooling_mode_lasttoken": "last"}
_TRANSFORMS = {"Normalize", "NormPower"}
_APPLIED = _TRANSFORMS | {"Pooling", "SpladePooling"}  # what clipmag's encoder does after the Transformer
_DOCUMENT_PROMPTS = ("document", "passage", "corpus")  # the names encode_document looks for, in its order
_HEAD_NAMES = {(1.0, 1.0): "cosine", (0.0, 0.0): "dot", (1.0, 0.0): "qnorm", (0.0, 1.0): "dnorm"}


class HeadUnreadableError(ValueError):
    """A model folder without a head record whose sentence-transformers config names no clipmag head."""


@dataclass
class _Module:
    """One module of the pipeline: its class name and where its config file lies."""

    kind: str
    config_path: str

    def config(self, source: str) -> dict[str, Any]:
        return model_file(source, self.config_path) or {}


@dataclass
class _Pipeline:
    """A sentence-transformers pipeline as its files describe it: each side's modules after the Transformer."""

    source: str
    similarity: str
    sides: dict[str, list[_Module]] = field(default_factory=dict)
    router: str | None = None  # the Router module's folder, if the sides are routed

    @classmethod
    def read(cls, source: str) -> _Pipeline | None:
        listed = model_file(source, "modules.json")
        if not isinstance(listed, list):
            return None
        config = model_file(source, "config_sentence_transformers.json") or {}
        pipeline = cls(source, str(config.get("similarity_fn_name") or "cosine"))
        entries = [m for m in listed if isinstance(m, dict)][1:]  # the first module is the Transformer
        modules = [_module(m.get("type"), str(m.get("path", ""))) for m in entries]
        after = [m for m in modules if m.kind != "Router"]
        router = next((entry for entry, m in zip(entries, modules) if m.kind == "Router"), None)
        if router is None:
            pipeline.sides = {"query": after, "document": after}
            return pipeline
        pipeline.router = str(router.get("path", ""))
        routed = model_file(source, _join(pipeline.router, "router_config.json")) or {}
        types, structure = routed.get("types", {}), routed.get("structure", {})
        for side, names in structure.items():
            pipeline.sides[side] = [_module(types.get(n), _join(pipeline.router, n)) for n in names] + after
        return pipeline

    def unapplied(self) -> list[str]:
        """Module kinds after the Transformer that clipmag's encoder does not run, each named once."""
        kinds = [m.kind for modules in self.sides.values() for m in modules]
        return list(dict.fromkeys(k for k in kinds if k not in _APPLIED))

    def pooling(self) -> str | None:
        for module in self.sides.get("document", []):
            if module.kind == "SpladePooling":
                return "splade"
            if module.kind == "Pooling":
                return _pooling_mode(module.config(self.source))
        return None

    def side_gamma(self, side: str) -> float | str:
        """The exponent this side divides by (``x / |x|^g``), or why it cannot be read."""
        modules = self.sides.get(side)
        if modules is None:
            return f"its Router has no {side!r} route"
        foreign = [m.kind for m in modules if m.kind not in _APPLIED]
        transforms = [m for m in modules if m.kind in _TRANSFORMS]
        if foreign:
            return f"the {side} side runs {', '.join(foreign)}, which clipmag's encoder does not"
        if len(transforms) > 1:
            return f"the {side} side scales by its norm {len(transforms)} times"
        if not transforms:
            return 0.0
        if transforms[0].kind == "Normalize":
            return 1.0
        gamma = transforms[0].config(self.source).get("gamma")
        return float(gamma) if isinstance(gamma, (int, float)) else f"{transforms[0].config_path} names no gamma"


def _join(*parts: str) -> str:
    return "/".join(part for part in parts if part)


def _module(type_name: Any, folder: str) -> _Module:
    """A module from its class path (``sentence_transformers.models.Normalize`` -> ``Normalize``) and folder."""
    return _Module(str(type_name or "").rsplit(".", 1)[-1], _join(folder, "config.json"))


def _pooling_mode(config: dict[str, Any]) -> str | None:
    if "pooling_mode" in config:
        return _POOLING_MODES.get(str(config["pooling_mode"]))
    return next((mode for key, mode in _POOLING_FLAGS.items() if config.get(key)), None)


@dataclass
class SentenceTransformersConfig:
    """What a model's sentence-transformers files say (all empty for a plain Hugging Face folder).

    ``settings``: pooling, max lengths and prefixes (the keys ``TextEncoder`` takes); ``unapplied``:
    modules of the pipeline that clipmag's encoder does not run (it stops at pooling), so its
    embeddings differ from sentence-transformers'; :meth:`head` the head, read lazily, since a
    caller that names its own head must not be refused for an unreadable one.
    """

    source: str
    settings: dict[str, Any] = field(default_factory=dict)
    unapplied: list[str] = field(default_factory=list)
    pipeline: _Pipeline | None = None

    def warn_unapplied(self) -> None:
        if self.unapplied:
            logger.warning(
                "%s: its sentence-transformers pipeline also runs %s, which clipmag's encoder does not (it stops "
                "at pooling); its embeddings here differ from sentence-transformers'",
                self.source,
                ", ".join(self.unapplied),
            )

    def declared_head(self) -> dict[str, Any]:
        """:meth:`head`, or for a plain Hugging Face encoder (which declares none) cosine, the usual
        default, with a line saying so."""
        head = self.head()
        if head is None:
            logger.warning(
                "%s: no %s and no sentence-transformers config, so no head is declared; scoring with cosine "
                "(name another with --norm)",
                self.source,
                HEAD_FILE,
            )
        return head or {"name": "cosine"}

    def head(self) -> dict[str, Any] | None:
        """The head (``SimilarityHead.to_dict`` form) the pipeline scores with; None for a folder
        that is no such pipeline; :class:`HeadUnreadableError` when it cannot be read."""
        pipeline = self.pipeline
        if pipeline is None:
            return None
        if pipeline.similarity == "cosine":
            return {"name": "cosine"}  # scaling a side by any power of its norm leaves the cosine as it was
        gammas = {side: pipeline.side_gamma(side) for side in ("query", "document")}
        problem = next((g for g in gammas.values() if isinstance(g, str)), None)
        if pipeline.similarity != "dot":
            problem = f"similarity_fn_name {pipeline.similarity!r}, which no clipmag head computes"
        if problem is not None:
            where = f"{pipeline.router}/router_config.json" if pipeline.router else "modules.json"
            raise HeadUnreadableError(
                f"model {self.source}: no {HEAD_FILE}, and its sentence-transformers config ({where}) does not say "
                f"which clipmag head scores it: {problem}; put the export's {HEAD_FILE} back, or name the head "
                "with --norm (cosine, dot, qnorm, dnorm or learnable)"
            )
        gq, gd = float(gammas["query"]), float(gammas["document"])
        name = _HEAD_NAMES.get((gq, gd))
        return {"name": name} if name else {"name": "learnable", "gq": gq, "gd": gd}


def sentence_transformers_config(source: str | Path) -> SentenceTransformersConfig:
    """The sentence-transformers files of a model folder or hub repository alike (a hub name gets
    what a downloaded copy would say)."""
    found: dict[str, Any] = {}
    lengths = model_file(source, "sentence_bert_config.json") or {}
    if lengths.get("max_seq_length"):
        found["query_max_length"] = found["document_max_length"] = int(lengths["max_seq_length"])
    for side in ("query", "document"):
        if lengths.get(f"{side}_length"):
            found[f"{side}_max_length"] = int(lengths[f"{side}_length"])
    pipeline = _Pipeline.read(str(source))
    pooling = pipeline.pooling() if pipeline else _pooling_mode(model_file(source, "1_Pooling/config.json") or {})
    if pooling:
        found["pooling"] = pooling
    prompts = (model_file(source, "config_sentence_transformers.json") or {}).get("prompts") or {}
    if prompts.get("query"):
        found["query_prefix"] = prompts["query"]
    document = next((prompts[name] for name in _DOCUMENT_PROMPTS if prompts.get(name)), None)
    if document:
        found["document_prefix"] = document
    unapplied = pipeline.unapplied() if pipeline else []
    return SentenceTransformersConfig(str(source), found, unapplied, pipeline)
