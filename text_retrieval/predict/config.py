"""The predictors' settings, plain data (no torch: the command line shows them before a model loads),
and the paper's threshold of the query-norm CV ratio."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, ClassVar

from clipmag.config.checks import NonNegativeInt, PositiveFloat, Range, Seed
from clipmag.config.spellings import BUNDLED_RENAME
from text_retrieval.config import PoolingName

__all__ = ["DCV_THRESHOLD", "PredictConfig"]

DCV_THRESHOLD = math.sqrt(2.0 * 4.0)
AtLeastTwo = Annotated[int, Range(2)]  # norms and pairs need two samples to have a spread


@dataclass
class PredictConfig:
    """The predictors' settings. ``data``: ``bundled``, a WebDataset shard folder, a BEIR folder
    (``split`` of its qrels) or a pairs jsonl; ``output``: write the JSON there instead of printing it."""

    model: str = "all-MiniLM-L6-v2"
    data: str = "bundled"
    split: str = "train"
    n_pairs: AtLeastTwo = 200
    max_length: AtLeastTwo = 64
    pooling: PoolingName | None = None
    seed: Seed = 0
    probe_steps: NonNegativeInt = 4
    probe_lr: PositiveFloat = 1e-4
    probe_batch_size: AtLeastTwo = 16
    fisher_batch_size: AtLeastTwo = 32
    dcv_threshold: PositiveFloat = DCV_THRESHOLD
    output: str | None = None

    RENAMED_VALUES: ClassVar[dict[str, dict[str, str]]] = {"data": BUNDLED_RENAME}
