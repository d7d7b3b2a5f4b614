"""A clipmag text encoder as an mteb (2.x) model: queries take the query route, documents the
document route, and every score is the encoder's similarity head.

mteb scores with the model's own ``similarity`` wherever it compares embeddings itself: retrieval
and reranking wrap any encoder that is not a search model in ``SearchEncoderWrapper``, which calls
``similarity(query_embeddings, document_embeddings)`` (queries as rows, so the asymmetric heads
qnorm and dnorm see the right order), and STS / pair classification call
``similarity_pairwise(embeddings1, embeddings2)``, the first column as the query. ``encode``
returns raw embeddings, as :meth:`TextEncoder.encode` does, and the head is applied only in those
two methods, so every score is ``head.score`` / ``head.paired`` exactly.

Where mteb uses a fixed function instead, the head does not count: STS's ``cosine_*`` columns
(the main score of its STS tasks, ``cosine_spearman``, is the cosine head's for every export; the
head's is ``spearman``), and classification and clustering, which read the raw embeddings.
``similarity_fn_name`` is ``cosine`` or ``dot`` only for heads that are exactly that, and
``custom`` otherwise, so mteb's FAISS index backend (which applies the named function to the raw
embeddings itself) refuses the other heads rather than scoring them wrongly.

One line::

    mteb.evaluate(load_for_mteb("runs/text/default/export"), mteb.get_tasks(tasks=["SciFact"]), cache=None)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch

try:
    from mteb.models import ModelMeta
    from mteb.models.abs_encoder import AbsEncoder
    from mteb.models.model_meta import ScoringFunction
    from mteb.types import PromptType
except ImportError as err:  # mteb 1.x has none of these
    raise ImportError(
        f"text_retrieval.evaluation.mteb_model needs mteb 2.x: pip install 'clipmag[mteb]' ({err})"
    ) from None

from text_retrieval.model.encoder import Side, TextEncoder

if TYPE_CHECKING:
    from mteb.abstasks.task_metadata import TaskMetadata
    from torch.utils.data import DataLoader

__all__ = ["ClipmagMTEBEncoder", "load_for_mteb"]


def _scoring_function(encoder: TextEncoder) -> ScoringFunction:
    """The named function equal to the head, for mteb code that applies one itself; else ``custom``."""
    gq, gd = encoder.head.gammas()
    if gq == gd == 1.0:
        return ScoringFunction.COSINE
    if gq == gd == 0.0:
        return ScoringFunction.DOT_PRODUCT
    return ScoringFunction.CUSTOM


def _side(prompt_type: PromptType | None) -> Side:
    """Documents take the document route; queries, and inputs mteb gives no role (STS, classification,
    clustering), the query route, as clipmag's own STS evaluation encodes both sentences."""
    return "document" if prompt_type == PromptType.document else "query"


class ClipmagMTEBEncoder(AbsEncoder):
    """mteb's encoder protocol over a :class:`TextEncoder`; its constructor is the protocol's loader.

    ``model_name`` is a clipmag export, a Hugging Face folder or name, or a packaged name
    (``all-MiniLM-L6-v2``); ``norm`` overrides the head and ``settings`` go to
    :meth:`TextEncoder.from_pretrained` (``query_max_length``, ``pooling``, ``head_settings`` ...).
    Both are the model meta's ``experiment_kwargs``, so mteb keeps results of each head apart in its
    cache and ``mteb_model_meta.load_model()`` rebuilds this model. The meta's revision is the
    weights' fingerprint: clipmag loads whatever the folder or name holds, so any other revision asked
    for is an error rather than ignored.
    """

    def __init__(
        self,
        model_name: str,
        revision: str | None = None,
        *,
        device: str | None = None,
        norm: str | None = None,
        **settings: Any,
    ) -> None:
        self.model = TextEncoder.from_pretrained(model_name, norm=norm, **settings)
        self.model.to(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        fingerprint = self.model.weights_fingerprint()
        if revision is not None and revision != fingerprint:
            raise ValueError(
                f"{model_name}: revision {revision!r} was asked for, but clipmag loads the weights the folder or "
                f"name holds now (fingerprint {fingerprint}); check out that revision and load its folder"
            )
        experiment = {key: value for key, value in {"norm": norm, **settings}.items() if value is not None}
        self.mteb_model_meta = ModelMeta.create_empty(
            overwrites={
                "loader": ClipmagMTEBEncoder,
                "name": str(model_name),
                "revision": fingerprint,
                "n_parameters": sum(p.numel() for p in self.model.parameters()),
                "max_tokens": max(self.model.query_max_length, self.model.document_max_length),
                "embed_dim": self.model.dim,
                "similarity_fn_name": _scoring_function(self.model),
                "framework": ["PyTorch", "Transformers"],
                "use_instructions": False,
                "experiment_kwargs": experiment or None,
            }
        )

    def encode(
        self,
        inputs: DataLoader[Any],
        *,
        task_metadata: TaskMetadata,
        hf_split: str,
        hf_subset: str,
        prompt_type: PromptType | None = None,
        **kwargs: Any,
    ) -> np.ndarray:
        """Raw embeddings [N, D] float32 of every text in ``inputs``, in order, on the route of
        ``prompt_type`` (its prefix and max length); the head is applied by the similarity methods.

        The export's own prefixes are used, not mteb's task instructions (``use_instructions`` is False)."""
        texts = [text for batch in inputs for text in batch["text"]]
        batch_size = int(kwargs.get("batch_size") or inputs.batch_size or 32)
        show_progress = bool(kwargs.get("show_progress_bar", False))
        return self.model.encode(texts, _side(prompt_type), batch_size, show_progress)

    def _tensor(self, embeddings: Any) -> torch.Tensor:
        return torch.atleast_2d(torch.as_tensor(embeddings, device=self.model.device)).float()

    @torch.no_grad()
    def similarity(self, embeddings1: Any, embeddings2: Any) -> torch.Tensor:
        """``head.score``: [N1, N2] with ``embeddings1`` as the queries (rows) and ``embeddings2`` as
        the documents (columns); for qnorm and dnorm the order matters."""
        return self.model.head.score(self._tensor(embeddings1), self._tensor(embeddings2)).cpu()

    @torch.no_grad()
    def similarity_pairwise(self, embeddings1: Any, embeddings2: Any) -> torch.Tensor:
        """``head.paired``: [N], ``embeddings1[i]`` as the query against ``embeddings2[i]`` as the document."""
        return self.model.head.paired(self._tensor(embeddings1), self._tensor(embeddings2)).cpu()


def load_for_mteb(path_or_name: str, norm: str | None = None, **settings: Any) -> ClipmagMTEBEncoder:
    """An export (or any text model clipmag loads) ready for ``mteb.evaluate``, scored with its head
    (or the head ``norm`` names); ``settings`` as for :meth:`TextEncoder.from_pretrained`."""
    return ClipmagMTEBEncoder(str(path_or_name), norm=norm, **settings)
