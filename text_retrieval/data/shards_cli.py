"""Build WebDataset training shards for the text trainer.

python scripts/make_text_shards.py OUT_DIR --beir DATA/beir/scifact [--split train]
python scripts/make_text_shards.py OUT_DIR --jsonl pairs.jsonl
python scripts/make_text_shards.py OUT_DIR --embedded [runs/embedded-data]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from clipmag.run_logging import setup_logging
from text_retrieval.data.pairs import pairs_from_beir, pairs_from_embedded, pairs_from_jsonl, shuffled
from text_retrieval.data.shards import write_text_shards

__all__ = ["main", "entry"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", type=Path, help="folder for shard-*.tar and sizes.json")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--beir", type=Path, help="BEIR folder; pairs from its qrels split")
    source.add_argument(
        "--jsonl", type=Path, help='jsonl of {"query","positive","negatives"?} or {"query","title","text"}'
    )
    source.add_argument(
        "--embedded",
        nargs="?",
        const=Path("runs/embedded-data"),
        type=Path,
        metavar="ROOT",
        help="the embedded default's training pairs (built under ROOT if absent)",
    )
    parser.add_argument("--split", default="train", help="qrels split for --beir (default: train)")
    parser.add_argument("--samples-per-shard", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0, help="seed of the shuffle before writing")
    parser.add_argument("--no-shuffle", action="store_true", help="keep the source order")
    parser.add_argument("--overwrite", action="store_true", help="replace shards already in OUT_DIR")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Write the shards; the exit status: 0, or 2 after one ``error:`` line for a bad source or OUT_DIR.

    It catches every ``OSError`` (not only the missing files :func:`clipmag.entry.run_entry_point` knows),
    so a full or existing OUT_DIR ends with one line as well.
    """
    args = _parser().parse_args(argv)
    setup_logging()
    try:
        if args.beir is not None:
            samples = pairs_from_beir(args.beir, args.split)
        elif args.jsonl is not None:
            samples = pairs_from_jsonl(args.jsonl)
        else:
            samples = pairs_from_embedded(args.embedded)
        if not args.no_shuffle:
            samples = shuffled(samples, args.seed)
        paths = write_text_shards(samples, args.out_dir, args.samples_per_shard, overwrite=args.overwrite)
    except (OSError, ValueError) as exc:  # DataFormatError is a ValueError and names file and line
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{len(samples)} samples in {len(paths)} shards -> {args.out_dir}")
    return 0


def entry() -> None:
    """Console-script entry: exits with :func:`main`'s status."""
    sys.exit(main())
