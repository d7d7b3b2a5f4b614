"""Mine hard negatives under a model's own similarity head (or the head ``--norm`` names) and write
them as training shards: every query of the data is searched against its corpus, and the
negatives are picked from the ranking by the selection rules below.

Examples:
    python scripts/mine_negatives.py --model all-MiniLM-L6-v2 --norm qnorm \\
        --data data/beir/scifact --split train --corpus data/beir/scifact/corpus.jsonl \\
        --output runs/data/scifact-mined-qnorm --rank-min 10 --rank-max 100 --relative-margin 0.05
    python scripts/mine_negatives.py --model all-MiniLM-L6-v2 --data bundled --output runs/data/bundled-mined
    torchrun --nproc_per_node=4 scripts/mine_negatives.py --model M --data pairs.jsonl --output OUT \\
        --cache-dir cache/emb                                         # the ranks share the corpus encoding

``--data`` is a pairs jsonl, a shard folder, a BEIR folder (judged pairs of ``--split``) or
``bundled`` (the trainer's bundled code-search pairs under ``--bundled-root``, built if absent). The corpus
searched is every positive of the data, plus the documents of ``--corpus`` (a BEIR corpus.jsonl or
its folder) when given: ``--negatives-from corpus`` (the default with ``--corpus``) draws negatives
from the whole corpus, documents judged for test queries included (nothing in the data says which
they are), ``training-judged`` (the default without) from the documents the mined split judges
relevant only; the manifest records which. The selection rules (rank window, margins, score cap, sampling, positive
exclusion) are documented in ``text_retrieval/retrieval/negatives.py``; mined negatives replace any
the data had. ``--norm`` defaults to the model's own head. The output folder holds the shards,
``sizes.json`` and ``manifest.json`` (model, head, every setting, the seed and the counts, among
them how many queries got fewer than ``--num-negatives``); it is written beside the output and
moved into place when complete, and an existing output is replaced only with ``--overwrite``. The
samples are shuffled with ``--seed`` (the seed of ``random`` sampling too) exactly as
``make_text_shards.py`` shuffles with it, so mined and plain shards of one source hold the same
samples in the same order. ``--semantics sentence-transformers`` makes the rank window, margins
and cap mean what the same-named arguments of sentence-transformers' ``mine_hard_negatives`` mean
(the window counted after the margins and the cap; ``negatives.py`` says where the default
differs). Every key is a flag (``--rank-max 50``) and a ``key=value`` token.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from clipmag.config.build import to_dict
from clipmag.config.checks import PositiveFloat, PositiveInt
from clipmag.config.command_line import field_flags, parse_cli
from clipmag.config.entry import run_entry_point
from clipmag.config.spellings import BUNDLED_RENAME
from clipmag.errors import ConfigError
from clipmag.results.provenance import provenance
from clipmag.results.record import encoding_numerics
from clipmag.runtime.logs import setup_logging
from clipmag.runtime.precision_setting import PRECISIONS
from clipmag.scoring.head_config import OWN_HEAD_RENAME, HeadChoice
from clipmag.storage.folder_lock import FolderLock
from clipmag.storage.naming import slug
from text_retrieval.config import BundledDataConfig, PoolingName
from text_retrieval.retrieval.index import CACHE_DTYPES, RetrievalSettings
from text_retrieval.retrieval.mining_output import MANIFEST, check_output, empty_but_lock, publish, writable
from text_retrieval.retrieval.negatives import MiningRules

if TYPE_CHECKING:
    from text_retrieval.model.encoder import TextEncoder

__all__ = ["MineConfig", "parse_args", "main", "entry"]

logger = logging.getLogger("clipmag")


@dataclass
class MineConfig:
    """One mining run. ``model``: a Hugging Face folder or name, or a clipmag export; ``head.name``
    (``--norm``) and ``pooling`` default to its own. ``rules``: the selection rules (``MiningRules`` of
    ``text_retrieval/retrieval/negatives.py``: ``num_negatives`` k, the rank window ``rank_min`` /
    ``rank_max`` counted from 0 among the non-positive candidates, ``rank_max`` excluded, the margins,
    ``max_score``, ``sampling``, ``seed`` and ``semantics``), each also a flag of its own name.
    ``negatives_from``: ``corpus`` (the ``corpus`` documents and the positives) or
    ``training-judged`` (the positives of ``split`` only); unset, ``corpus`` exactly when ``corpus``
    is given. Encoding: max lengths default to the model's own.
    ``cache_dir`` keeps the raw corpus embeddings (one cache serves every head)."""

    model: str = ""
    data: str = ""
    output: str = ""
    head: HeadChoice = field(default_factory=HeadChoice)
    pooling: PoolingName | None = None
    split: str = "train"
    corpus: str | None = None
    bundled_root: str = BundledDataConfig.root  # the trainer's own
    rules: MiningRules = field(default_factory=MiningRules)
    negatives_from: Literal["corpus", "training-judged"] | None = None
    no_shuffle: bool = False
    samples_per_shard: PositiveInt = 1000
    overwrite: bool = False
    batch_size: PositiveInt = 64
    query_max_length: PositiveInt | None = None
    document_max_length: PositiveInt | None = None
    precision: Literal[PRECISIONS] = "auto"  # type: ignore[valid-type]
    cache_dir: str | None = None
    cache_dtype: Literal[tuple(CACHE_DTYPES)] = "fp32"  # type: ignore[valid-type]
    chunk_size: PositiveInt = 10_000
    search_memory_gb: PositiveFloat = 4.0
    quiet: bool = False

    RENAMED_KEYS: ClassVar[dict[str, str]] = {"norm": "head.name", "embedded_root": "bundled_root"}
    RENAMED_FLAGS: ClassVar[dict[str, str]] = {"embedded_root": "bundled_root"}
    RENAMED_VALUES: ClassVar[dict[str, dict[str | None, str]]] = {"data": BUNDLED_RENAME, "head.name": OWN_HEAD_RENAME}

    @property
    def pool(self) -> str:
        """Where negatives come from: ``corpus`` or ``training-judged``."""
        return self.negatives_from or ("corpus" if self.corpus else "training-judged")


# Every key is a flag of its own name, the selection rules' too (``--rank-min`` sets ``rules.rank_min``).
FLAGS = {
    **{name: key for name, key in field_flags(MineConfig).items() if name not in ("head", "rules")},
    "norm": "head.name",
    **{rule.name: f"rules.{rule.name}" for rule in fields(MiningRules)},
}


def parse_args(argv: Sequence[str]) -> MineConfig:
    """``--model M --data D --output OUT [--flag value ...] [key=value ...]`` -> a checked config."""
    cfg = parse_cli(MineConfig, argv, FLAGS, description=__doc__)
    missing = [f"--{key}" for key in ("model", "data", "output") if not getattr(cfg, key)]
    if missing:
        raise ConfigError(f"command line: {' and '.join(missing)} needed; see --help")
    if cfg.negatives_from == "corpus" and not cfg.corpus:
        raise ConfigError("command line: --negatives-from corpus needs --corpus (the documents to draw from)")
    if cfg.negatives_from == "training-judged" and cfg.corpus:
        raise ConfigError(
            f"command line: --negatives-from training-judged draws from the positives of --split {cfg.split} only, "
            f"but --corpus {cfg.corpus} adds documents to draw from: give one of the two"
        )
    return cfg


def _encoder(cfg: MineConfig) -> TextEncoder:
    import torch  # the encoder, the readers and the search load here, after the command line is read

    from text_retrieval.model.encoder import TextEncoder

    encoder = TextEncoder.from_pretrained(
        cfg.model,
        norm=cfg.head.instead,
        pooling=cfg.pooling,
        precision=cfg.precision,
        query_max_length=cfg.query_max_length,
        document_max_length=cfg.document_max_length,
    )
    return encoder.to("cuda") if torch.cuda.is_available() else encoder


def _mine(cfg: MineConfig, staging: Path) -> tuple[TextEncoder, list[dict[str, Any]], dict[str, Any]] | None:
    """The encoder, the mined samples and the summary; None on the ranks that only helped encode."""
    from text_retrieval.retrieval.mining import mine_negatives
    from text_retrieval.retrieval.mining_sources import load_corpus, load_samples
    from text_retrieval.retrieval.shared_encoding import shared_encoding

    samples = load_samples(cfg.data, cfg.split, cfg.bundled_root)
    corpus = load_corpus(cfg.corpus) if cfg.corpus else []
    encoder = _encoder(cfg)
    name = f"mining-{slug(Path(cfg.corpus).stem if cfg.corpus else Path(cfg.data).name, fallback='corpus')}"
    with shared_encoding(staging, cfg.cache_dir) as (cache_dir, distributed):
        settings = RetrievalSettings(
            cfg.chunk_size, cfg.cache_dtype, distributed, "exact", "auto", memory_gb=cfg.search_memory_gb
        )
        mined = mine_negatives(
            encoder, samples, cfg.rules, corpus, cache_dir, name, cfg.batch_size, not cfg.quiet, settings
        )
    return None if mined is None else (encoder, *mined)


def _write(
    cfg: MineConfig, encoder: TextEncoder, samples: list[dict[str, Any]], summary: dict[str, Any], staging: Path
) -> dict[str, Any]:
    """Shards and manifest into ``staging``, which then replaces the output; the manifest."""
    from text_retrieval.data.training.pairs import shuffled
    from text_retrieval.data.training.shards import write_text_shards

    output = Path(cfg.output)
    if not cfg.no_shuffle:
        samples = shuffled(samples, cfg.rules.seed)
    paths = writable(write_text_shards, staging, samples, staging, cfg.samples_per_shard)
    manifest = {
        "model": cfg.model,
        "encoder": encoder.head_record().to_dict(),
        "head": encoder.head.to_dict(),
        "seed": cfg.rules.seed,
        "settings": to_dict(cfg),
        "negatives_from": cfg.pool,
        "counts": {**summary, "shards": len(paths)},
        "numerics": encoding_numerics(encoder.precision, encoder.device),
        "provenance": provenance(to_dict(cfg)),
    }
    text = json.dumps(manifest, indent=2, ensure_ascii=False) + "\n"
    writable((staging / MANIFEST).write_text, staging, text, encoding="utf-8")
    writable(publish, output, staging, output)
    short, k = summary["queries_fewer_than_k"], cfg.rules.num_negatives
    if short:
        logger.warning(
            "%d of %d queries got fewer than %d negatives (%d none; training with data.hard_negatives cycles a "
            "query's negatives and stops at a sample without any): see %s",
            short,
            summary["queries"],
            k,
            summary["queries_without_negatives"],
            output / MANIFEST,
        )
    print(
        f"{len(samples)} samples, {summary['queries']} queries ({short} with fewer than {k} negatives) "
        f"mined under {encoder.head.name} in {len(paths)} shards -> {output}"
    )
    return manifest


def main(argv: Sequence[str]) -> dict[str, Any] | None:
    """Mine, write the shards and the manifest; the manifest (None on the helper ranks of torchrun).

    Everything is written into a staging folder beside the output (which also holds the temporary
    corpus cache of a torchrun run without ``--cache-dir``), removed when the run fails."""
    cfg = parse_args(argv)  # --help ends here, before torch loads
    from clipmag.runtime.distributed import environment_rank

    rank = environment_rank()
    setup_logging(rank=rank, level=logging.WARNING if cfg.quiet else logging.INFO)
    output = Path(cfg.output)
    staging = output.with_name(f".{output.name}.partial")
    # rank 0 locks the staging folder before touching anything: a second miner into this output is
    # refused at once instead of clearing the first one's partial files; the lock file moves into
    # the output with the staging folder
    lock = FolderLock(staging, "mining run").acquire() if rank == 0 else None
    try:
        check_output(output, cfg.overwrite)
        if rank == 0:  # a killed run's partial files go; the other ranks write nowhere before a barrier
            empty_but_lock(staging)
        mined = _mine(cfg, staging)
        return None if mined is None else _write(cfg, *mined, staging)
    finally:
        if lock is not None:  # staging was moved into place on success, so this removes a failed run's
            shutil.rmtree(staging, ignore_errors=True)
            lock.release()


def entry() -> None:
    """Console-script entry: user errors end with one ``error:`` line and exit status 2."""
    run_entry_point(main)
