"""Build WebDataset training shards for the text trainer from (query, positive[, negatives]) pairs:
the judged pairs of a BEIR folder, a pairs jsonl file or the bundled default's training pairs.
The pairs are shuffled with a seed and written as ``OUT_DIR/shard-*.tar`` with ``sizes.json``;
train on them with ``data.train=OUT_DIR``.

Examples:
    clipmag-make-text-shards data/scifact-shards --beir data/beir/scifact --split train
    clipmag-make-text-shards data/pairs-shards --jsonl pairs.jsonl --samples-per-shard 5000
    clipmag-make-text-shards runs/data/bundled-shards --bundled

One source: ``beir`` (pairs from the ``split`` of its qrels), ``jsonl`` (``{"query", "positive",
"negatives"?}`` or ``{"query", "title", "text"}`` per line) or ``--bundled`` (the bundled default's
training pairs, built under ``bundled_root`` if absent). The pairs are shuffled with ``seed``
unless ``no_shuffle``; ``overwrite`` replaces shards already in OUT_DIR.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from clipmag.config.checks import PositiveInt, Seed
from clipmag.config.command_line import field_flags, parse_cli, require_one_of
from clipmag.config.entry import run_entry_point, user_message
from clipmag.runtime.logs import setup_logging
from clipmag.storage.folder_lock import FolderLock

__all__ = ["TextShardsCommand", "parse_args", "main", "entry"]


@dataclass
class TextShardsCommand:
    """The shard builder's settings (module docstring)."""

    out_dir: str = ""
    beir: str | None = None
    jsonl: str | None = None
    bundled: bool = False
    bundled_root: str = "runs/bundled-data"
    split: str = "train"
    samples_per_shard: PositiveInt = 1000
    seed: Seed = 0
    no_shuffle: bool = False
    overwrite: bool = False

    RENAMED_KEYS: ClassVar[dict[str, str]] = {"embedded": "bundled", "embedded_root": "bundled_root"}
    RENAMED_FLAGS: ClassVar[dict[str, str]] = RENAMED_KEYS  # every key is a flag of its own name


def parse_args(argv: Sequence[str]) -> TextShardsCommand:
    """``OUT_DIR`` and exactly one of ``--beir``, ``--jsonl``, ``--bundled``."""
    args = parse_cli(TextShardsCommand, argv, field_flags(TextShardsCommand), description=__doc__, positional="out_dir")
    require_one_of(args, ("beir", "jsonl", "bundled"), "OUT_DIR", bool(args.out_dir))
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Write the shards; the exit status: 0, or 2 after one ``error:`` line for a bad source or OUT_DIR.

    It catches every ``OSError`` (not only the missing files :func:`clipmag.config.entry.run_entry_point` knows),
    so a full or existing OUT_DIR ends with one line as well.
    """
    setup_logging()
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)  # --help ends here, before torch loads
        from text_retrieval.data.bundled.build import pairs_from_bundled
        from text_retrieval.data.training.pairs import pairs_from_beir, pairs_from_jsonl, shuffled
        from text_retrieval.data.training.shards import write_text_shards

        with FolderLock(args.out_dir, "shard build"):  # a second build into OUT_DIR stops here, naming this one
            if args.beir is not None:
                samples = pairs_from_beir(args.beir, args.split)
            elif args.jsonl is not None:
                samples = pairs_from_jsonl(args.jsonl)
            else:
                samples = pairs_from_bundled(args.bundled_root)
            if not args.no_shuffle:
                samples = shuffled(samples, args.seed)
            paths = write_text_shards(samples, args.out_dir, args.samples_per_shard, overwrite=args.overwrite)
    except BrokenPipeError:  # the reader of standard output has gone: the entry point ends quietly
        raise
    except (OSError, ValueError) as exc:  # DataFormatError and ConfigError are ValueErrors naming file, line or key
        print(f"error: {user_message(exc)}", file=sys.stderr)
        return 2
    print(f"{len(samples)} samples in {len(paths)} shards -> {args.out_dir}")
    return 0


def entry() -> None:
    """Console-script entry: exits with :func:`main`'s status."""
    run_entry_point(lambda argv: sys.exit(main(argv)))
