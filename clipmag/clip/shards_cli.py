"""Command line of the CLIP shard builder: an image folder and a captions file (or the embedded digits
set) -> training shards + CLIP-benchmark sets.

    python scripts/make_clip_shards.py --images photos/ --captions captions.tsv --output data/mine \
        [--name mine] [--test-fraction 0.1] [--classnames classes.txt --templates templates.txt]
    python scripts/make_clip_shards.py --embedded --output data/digits      # the composite digits

captions.tsv: ``filename<TAB>caption[<TAB>class index]`` per line. Writes data/X/train/*.tar
(+ sizes.json), data/X/test/*.tar (open_clip validation shards) and data/X/wds/<name>_retrieval
(+ <name>_classification when classes are given), in CLIP-benchmark's wds layout.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Sequence

from clipmag.entry import run_entry_point

from . import embedded, shards


def main(argv: Sequence[str] | None = None) -> Path:
    """Write the shards and benchmark sets; returns the output folder."""
    p = argparse.ArgumentParser(prog="clipmag-make-clip-shards", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--output", required=True)
    p.add_argument("--images")
    p.add_argument("--captions")
    p.add_argument("--embedded", action="store_true", help="write the composite digits set instead")
    p.add_argument("--name", default=None, help="benchmark set name (default: digits or the output folder name)")
    p.add_argument("--test-fraction", type=float, default=0.1)
    p.add_argument("--shard-size", type=int, default=1000)
    p.add_argument("--classnames")
    p.add_argument("--templates")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--embedded-train", type=int, default=20000)
    p.add_argument("--embedded-test", type=int, default=1000)
    p.add_argument("--embedded-per-class", type=int, default=50)
    args = p.parse_args(argv)
    out = Path(args.output)
    classnames = templates = None
    if args.embedded:
        name = args.name or "digits"
        sets = embedded.build_embedded(args.embedded_train, args.embedded_test, args.embedded_per_class, seed=args.seed)
        as_samples = lambda s, tag: [(f"{tag}{i:07d}", s.pil(i), s.captions[i], None if s.labels[i] < 0 else int(s.labels[i])) for i in range(len(s))]  # noqa: E731
        train, test, cls = as_samples(sets.train, "tr"), as_samples(sets.test, "te"), as_samples(sets.classification, "cl")
        classnames, templates = list(embedded.CLASSNAMES), list(embedded.TEMPLATES)
    else:
        if not (args.images and args.captions):
            p.error("give --images and --captions, or --embedded")
        name = args.name or out.name
        samples = shards.folder_samples(args.images, shards.read_caption_file(args.captions))
        train, test = shards.split_samples(samples, args.test_fraction, args.seed)
        if args.classnames and args.templates:
            classnames = Path(args.classnames).read_text().split("\n")
            classnames = [c.strip() for c in classnames if c.strip()]
            templates = [t.strip() for t in Path(args.templates).read_text().splitlines() if t.strip()]
        cls = [s for s in test if s[3] is not None] if classnames else []
    shards.write_shards(train, out / "train", args.shard_size)
    shards.write_shards(test, out / "test", args.shard_size)
    shards.write_benchmark_retrieval([(k, im, c, None) for k, im, c, _ in test], out / "wds" / f"{name}_retrieval", args.shard_size)
    if classnames and cls:
        shards.write_benchmark_classification(cls, out / "wds" / f"{name}_classification", classnames, templates, args.shard_size)
    print(f"wrote {len(train)} train and {len(test)} test samples to {out}; CLIP-benchmark sets in {out / 'wds'}")
    return out


def entry() -> None:
    """Console script ``clipmag-make-clip-shards``."""
    run_entry_point(main)
