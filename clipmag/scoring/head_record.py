"""The head record: one versioned description of how a model's embeddings are scored.

A trained model is only usable if its scorer knows the head (with learned gammas), which tower is
the query, the loss scale it was trained at and, for text encoders, pooling, prefixes and max
lengths. Tevatron does not save these and users must repeat them at encode time; here one
``HeadRecord`` travels with the model everywhere: ``clipmag_head.json`` in every export (text and
CLIP), the ``head`` entry of every checkpoint, and the ``head`` entry of every ``results.json``.

Format 2 is this dataclass as a dict. Format 1 files still load: the text export's
``{"format_version": 1, "head": ..., "pooling": ...}``, the CLIP export's record without a
version, and bare head dicts (``{"name": "qnorm"}``) from older checkpoints. Records written before
the loss kind was kept were trained with InfoNCE when they name a loss direction (``loss_kind``
``infonce``); any other leaves it None.

Max lengths: ``query_max_length`` / ``document_max_length`` are the lengths the model is *used*
at - for a trained export, the lengths its run's final test encoded at, which sentence-transformers,
MTEB and ``eval_text.py`` then load - and ``training_*_max_length`` the lengths it was trained at.
Records written before the training fields existed held the training lengths in the first pair
(their runs tested at them), so a record of a clipmag-trained model (``scale`` set) that lacks them
takes them from there; any other record gets None.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clipmag.storage.finite import require_finite

if TYPE_CHECKING:
    from clipmag.scoring.heads import SimilarityHead

HEAD_FILE = "clipmag_head.json"
CARD_FILE = "README.md"  # the model card every export carries beside it (the Hub shows it)
FORMAT_VERSION = 2


class HeadRecordError(ValueError):
    """A head record that cannot be read; the message names its source."""


@dataclass
class HeadRecord:
    """Everything besides the weights that decides how embeddings become scores.

    ``head``: ``SimilarityHead.to_dict()`` (name, and the learned gammas of ``learnable``).
    ``query_side``: the tower whose embeddings are the query (``image`` / ``text`` for CLIP;
    ``None`` for a text encoder, whose one tower serves both sides). ``loss_kind`` (``infonce``,
    ``siglip``, or ``mse`` for the STS objective), ``loss_direction`` (InfoNCE's softmax axis),
    ``scale`` and ``bias`` (SigLIP's logit bias): the loss the model was trained with (``None`` when
    not trained by clipmag).
    Pooling, prefixes and max lengths apply to text encoders only. ``query_max_length`` /
    ``document_max_length`` are the lengths to encode with - what the run's own test used, so
    every loader scores what the run reported - and ``training_*_max_length`` what it trained at
    (``None`` in records written before they were kept apart). ``random_init_seed``: set when the
    weights did not begin as ``model_name``'s but were drawn fresh with this seed in its architecture
    (the from-scratch start), so a reader of the record or of a ``results.json`` cannot mistake a
    random start for the pretrained model it is named after; ``None``: ``model_name``'s own weights.
    """

    head: dict[str, Any] = field(default_factory=lambda: {"name": "cosine"})
    query_side: str | None = None
    loss_direction: str | None = None
    scale: float | None = None
    loss_kind: str | None = None
    bias: float | None = None
    pooling: str | None = None
    query_prefix: str | None = None
    document_prefix: str | None = None
    query_max_length: int | None = None
    document_max_length: int | None = None
    training_query_max_length: int | None = None
    training_document_max_length: int | None = None
    model_name: str | None = None
    random_init_seed: int | None = None
    format_version: int = FORMAT_VERSION

    @property
    def head_name(self) -> str:
        return str(self.head["name"])

    def with_head(self, head: SimilarityHead) -> HeadRecord:
        return dataclasses.replace(self, head=head.to_dict())

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any], source: str = "head record") -> HeadRecord:
        """Read format 2, format 1 (text or CLIP export) or a bare head dict."""
        if not isinstance(values, Mapping):
            raise HeadRecordError(f"{source}: expected a JSON object, got {type(values).__name__}")
        values = dict(values)
        if "name" in values and "head" not in values:  # a bare head dict
            values = {"head": values}
        version = int(values.pop("format_version", 1))
        if version > FORMAT_VERSION:
            raise HeadRecordError(
                f"{source}: format_version {version} is newer than this clipmag reads ({FORMAT_VERSION})"
            )
        known = {f.name for f in dataclasses.fields(cls)}
        head = values.get("head")
        if not isinstance(head, Mapping) or "name" not in head:
            raise HeadRecordError(f"{source}: key 'head' must be an object with a 'name', got {head!r}")
        if values.get("loss_direction") is not None:  # an InfoNCE run, before the loss kind was kept
            values.setdefault("loss_kind", "infonce")
        if values.get("scale") is not None:  # trained by clipmag, before the training lengths had fields
            for side in ("query", "document"):
                values.setdefault(f"training_{side}_max_length", values.get(f"{side}_max_length"))
        record = cls(**{k: v for k, v in values.items() if k in known})  # format 1 extras (e.g. objective) drop
        from clipmag.scoring.heads import build_head  # torch: only once a record is read, never for --help

        try:
            build_head(record)
        except ValueError as err:
            raise HeadRecordError(f"{source}: {err}") from None
        return record

    def write(self, directory: str | Path) -> Path:
        """``clipmag_head.json`` in ``directory``; refused when a number of the record is inf or nan (a
        scale trained past what a float holds), which no loader could rebuild a head from."""
        path = Path(directory) / HEAD_FILE
        require_finite(self.to_dict(), str(path))
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")
        return path

    @classmethod
    def read(cls, directory: str | Path) -> HeadRecord:
        path = Path(directory) / HEAD_FILE
        try:
            values = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise HeadRecordError(f"{path}: not valid JSON: {err}") from None
        return cls.from_dict(values, source=str(path))

    @classmethod
    def exists(cls, directory: str | Path) -> bool:
        return (Path(directory) / HEAD_FILE).is_file()
