r"""Build the image-text trainer's data: images with their captions -> train / val / test WebDataset
shards and CLIP-benchmark sets, split by image, from a captions file, a Karpathy split file (COCO,
Flickr30k; ``--download`` fetches them first), the bundled composite digits or the emoji set (pinned
Debian packages, fetched once into a cache).

Examples:
    python scripts/make_clip_shards.py --output data/mine --images photos/ --captions captions.tsv \
        [--val-fraction 0.05] [--test-fraction 0.1] [--classnames classes.txt --templates templates.txt]
    python scripts/make_clip_shards.py --output data/coco --images data/raw/coco \
        --karpathy data/raw/coco/dataset_coco.json
    python scripts/make_clip_shards.py --output data/coco --images data/raw/coco --download coco   # or flickr30k
    python scripts/make_clip_shards.py --output data/digits --bundled       # the composite digits
    python scripts/make_clip_shards.py --output data/emoji --emoji --val-fraction 0.1 --test-fraction 0.2

captions.tsv: ``filename<TAB>caption[<TAB>class index]`` per line; an image with several captions
appears on several lines. A Karpathy split file (COCO, Flickr30k) brings its own train / val / test
split (``restval`` joins train); a captions file is split at random by image, seeded. Writes
OUT/{train,val,test}/shard-*.tar (+ sizes.json; one sample per image holding all its captions),
OUT/splits.json (which image went where, and by which rule) and, in CLIP-benchmark's wds layout,
OUT/wds/<name>_retrieval from the test split (+ <name>_classification when classes are given), and
with classes OUT/baselines.json: chance, majority-class and pixel nearest-neighbour zero-shot and
random-ranking retrieval on each evaluated split (:mod:`image_text.data.baselines`).
Train with ``--train OUT/train --validation OUT/val --test OUT/test``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, Literal

from clipmag.config.checks import Fraction, PositiveInt, Seed
from clipmag.config.command_line import field_flags, parse_cli, require_one_of
from clipmag.config.entry import run_entry_point
from clipmag.errors import UserError
from clipmag.storage.user_files import non_blank_lines

from . import sources
from .baselines import set_baselines
from .config import DigitsSizes
from .download import download
from .emoji import build_emoji
from .shards import Sample, caption_text, write_benchmark_classification, write_benchmark_retrieval, write_shards

Splits = dict[str, list[Sample]]
SOURCES = ("captions", "karpathy", "download", "bundled", "emoji")
BASELINES_FILE = "baselines.json"
SHIFTED_NAME = "grey"  # the emoji set's shifted domain: its test emoji in grey


@dataclass
class ClipShardsCommand:
    """What to write. One source: ``captions`` (``filename<TAB>caption[<TAB>class]`` per line, one
    line per caption), ``karpathy`` (a Karpathy split file), ``download`` (fetch into ``images``, then
    as ``karpathy``), ``bundled`` (the composite digits) or ``emoji`` (Noto emoji with Unicode and
    CLDR texts from pinned Debian packages, :mod:`image_text.data.emoji`). ``images``: the image folder;
    ``name``: the benchmark set's name (default: digits, emoji, or the output folder's name); the
    fractions split a captions file's images or the emoji set's base emoji; ``overwrite`` replaces
    shards an earlier run left in ``output``. ``emoji_size``: the side of an emoji image in pixels;
    ``emoji_limit``: about that many base emoji, for a small set; ``deb_cache``: where the Debian
    packages are kept (default ``~/.cache/clipmag/debian``)."""

    output: str = ""
    images: str | None = None
    captions: str | None = None
    karpathy: str | None = None
    download: Literal["coco", "flickr30k"] | None = None
    bundled: bool = False
    emoji: bool = False
    name: str | None = None
    val_fraction: Fraction = 0.05
    test_fraction: Fraction = 0.1
    shard_size: PositiveInt = 1000
    classnames: str | None = None
    templates: str | None = None
    seed: Seed = 0
    overwrite: bool = False
    emoji_size: PositiveInt = 64
    emoji_limit: PositiveInt | None = None
    deb_cache: str | None = None
    bundled_sizes: DigitsSizes = field(default_factory=DigitsSizes)

    RENAMED_KEYS: ClassVar[dict[str, str]] = {
        "embedded": "bundled",
        "embedded_sizes": "bundled_sizes",
        "bundled_sizes.val": "bundled_sizes.validation",
    }
    RENAMED_FLAGS: ClassVar[dict[str, str]] = {
        "embedded": "bundled",
        **{f"embedded_{size.name}": f"bundled_{size.name}" for size in fields(DigitsSizes)},
        "embedded_val": "bundled_validation",
        "bundled_val": "bundled_validation",
    }


# Every key is a flag of its own name; the bundled set's sizes are --bundled-train, --bundled-validation, ...
FLAGS = {
    **{name: key for name, key in field_flags(ClipShardsCommand).items() if name != "bundled_sizes"},
    **{f"bundled_{size.name}": f"bundled_sizes.{size.name}" for size in fields(DigitsSizes)},
}


def parse_args(argv: Sequence[str]) -> ClipShardsCommand:
    """The checked command: an output folder and exactly one source."""
    args = parse_cli(ClipShardsCommand, argv, FLAGS, description=__doc__)
    require_one_of(args, SOURCES, "--output", bool(args.output))
    return args


def _bundled_splits(args: ClipShardsCommand) -> tuple[Splits, list[Sample], dict[str, Any]]:
    from . import bundled  # the bundled set's builder loads torch: only when it is asked for

    sets = bundled.build_sized(args.bundled_sizes, args.seed)

    def as_samples(split: bundled.CompositeSplit, tag: str) -> list[Sample]:
        # ``split.captions`` writes every caption of the split: taken once, not once per sample
        captions = split.captions
        labels = [None if label < 0 else int(label) for label in split.labels.tolist()]
        return [Sample(f"{tag}{i:07d}", split.pil(i), captions[i], labels[i]) for i in range(len(split))]

    splits = {
        "train": as_samples(sets.train, "tr"),
        "val": as_samples(sets.val, "va"),
        "test": as_samples(sets.test, "te"),
    }
    rule = f"bundled digits, seed {args.seed}: composites of disjoint scan pools per split (bundled.py)"
    return splits, as_samples(sets.classification, "cl"), {"source": "bundled", "rule": rule}


def _folder_splits(args: ClipShardsCommand) -> tuple[Splits, dict[str, Any]]:
    """Samples of an image folder by a captions file or a Karpathy split file; keys number the
    images in the order of the source, so a key names one image in every split."""
    if not args.images:
        raise ValueError("--captions, --karpathy and --download need --images (the image folder)")
    image_dir, karpathy = Path(args.images), args.karpathy
    if args.download:
        split_file, image_dir = download(args.download, image_dir)
        karpathy = str(split_file)
    if karpathy:
        entries = sources.read_karpathy(karpathy)
        by_split = sources.given_splits(entries, args.seed)
        how = {
            "source": karpathy,
            "rule": f"the file's Karpathy split, restval in train; train order seed {args.seed}",
        }
    else:
        entries = sources.read_caption_file(args.captions)
        by_split = sources.split_by_image(entries, args.val_fraction, args.test_fraction, args.seed)
        how = {
            "source": args.captions,
            "rule": f"random by image: val {args.val_fraction}, test {args.test_fraction}, seed {args.seed}",
        }
    missing = [e.name for e in entries if not (image_dir / e.name).is_file()]
    if missing:
        raise FileNotFoundError(f"{len(missing)} listed images are not in {image_dir}, e.g. {image_dir / missing[0]}")
    keys = {e.name: f"{i:08d}" for i, e in enumerate(entries)}
    splits = {
        split: [Sample(keys[e.name], image_dir / e.name, e.captions, e.label) for e in part]
        for split, part in by_split.items()
    }
    return splits, {**how, "names": {keys[e.name]: e.name for e in entries}}


def _clear(directory: Path, overwrite: bool) -> None:
    old = sorted(directory.glob("*.tar"))
    if old and not overwrite:
        raise UserError(f"{directory} already holds {len(old)} shards; pass --overwrite to replace them")
    for path in old:
        path.unlink()


def _record(splits: Splits, how: dict[str, Any]) -> dict[str, Any]:
    """``splits.json``: the source, the rule, and which image (by sample key) went where; a folder
    source adds each key's file name (``names``), the emoji set what its cleaning removed (``removed``)."""
    return {
        "source": how["source"],
        "rule": how["rule"],
        "counts": {
            s: {"images": len(v), "captions": sum(len(caption_text(x.captions, x.key).splitlines()) for x in v)}
            for s, v in splits.items()
        },
        "images": {s: [x.key for x in v] for s, v in splits.items()},
        **({"names": how["names"]} if "names" in how else {}),
        **({"removed": how["removed"]} if "removed" in how else {}),
    }


def _reported(samples: Sequence[Sample], split: str, every: int) -> Iterator[Sample]:
    """``samples`` as they are written, with a line after every shard: a long build shows it moves."""
    for i, sample in enumerate(samples, 1):
        yield sample
        if i % every == 0 or i == len(samples):
            print(f"{split}: {i}/{len(samples)} images written", flush=True)


@dataclass
class Built:
    """What a source gives the writer: the splits, how they were made, the benchmark sets' name,
    the zero-shot classes (none for a source without them) and a shifted domain's test images."""

    splits: Splits
    how: dict[str, Any]
    name: str
    classnames: list[str] | None = None
    templates: list[str] | None = None
    classified: list[Sample] = field(default_factory=list)
    shifted: list[Sample] = field(default_factory=list)


def _built(args: ClipShardsCommand, out: Path) -> Built:
    if args.bundled:
        from . import bundled

        splits, classified, how = _bundled_splits(args)
        return Built(splits, how, args.name or "digits", list(bundled.CLASSNAMES), list(bundled.TEMPLATES), classified)
    if args.emoji:
        cache = Path(args.deb_cache) if args.deb_cache else None
        made = build_emoji(cache, args.emoji_size, args.val_fraction, args.test_fraction, args.seed, args.emoji_limit)
        name = args.name or "emoji"
        return Built(made.splits, made.record, name, made.classnames, made.templates, made.splits["test"], made.shifted)
    splits, how = _folder_splits(args)
    built = Built(splits, how, args.name or out.name)
    if args.classnames and args.templates:
        built.classnames = non_blank_lines(args.classnames, "--classnames")
        built.templates = non_blank_lines(args.templates, "--templates")
        built.classified = [s for s in splits["test"] if s.label is not None]
    return built


def _write_benchmarks(
    built: Built, test: list[Sample], classified: list[Sample], name: str, wds: Path, args: ClipShardsCommand
) -> None:
    """CLIP-benchmark's retrieval set of ``test`` and, with classes, the classification set of ``classified``."""
    for task in ("retrieval", "classification"):
        _clear(wds / f"{name}_{task}" / "test", args.overwrite)
    write_benchmark_retrieval(test, wds / f"{name}_retrieval", args.shard_size)
    if built.classnames and built.templates and classified:
        write_benchmark_classification(
            classified, wds / f"{name}_classification", built.classnames, built.templates, args.shard_size
        )


def _write_baselines(built: Built, path: Path) -> None:
    """``baselines.json``: what the validation, test and shifted images give without learning
    (:mod:`image_text.data.baselines`), for every table of a model trained on the set."""
    evaluated = {"val": built.splits["val"], "test": built.classified, SHIFTED_NAME: built.shifted}
    n_classes = len(built.classnames or [])
    record = {
        name: set_baselines(built.splits["train"], samples, n_classes)
        for name, samples in evaluated.items()
        if samples and all(s.label is not None for s in samples)
    }
    path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


def main(argv: Sequence[str]) -> Path:
    """Write the shards, the split record and the benchmark sets; returns the output folder."""
    args = parse_args(argv)
    out = Path(args.output)
    built = _built(args, out)
    splits = built.splits
    for split, samples in splits.items():
        _clear(out / split, args.overwrite)
        if samples:
            write_shards(_reported(samples, split, args.shard_size), out / split, args.shard_size)
    (out / "splits.json").write_text(json.dumps(_record(splits, built.how), indent=1) + "\n", encoding="utf-8")
    if built.classnames and built.templates:  # what the trainer's data.classnames / data.templates read
        (out / "classnames.txt").write_text("\n".join(built.classnames) + "\n", encoding="utf-8")
        (out / "templates.txt").write_text("\n".join(built.templates) + "\n", encoding="utf-8")
    if built.classnames and splits["train"] and all(s.label is not None for s in splits["train"]):
        _write_baselines(built, out / BASELINES_FILE)
    if splits["test"]:
        _write_benchmarks(built, splits["test"], built.classified, built.name, out / "wds", args)
    if built.shifted:
        _write_benchmarks(built, built.shifted, built.shifted, f"{built.name}_{SHIFTED_NAME}", out / "wds", args)
    counts = ", ".join(f"{len(v)} {k}" for k, v in splits.items())
    print(f"wrote {counts} images to {out} (split record: {out / 'splits.json'}); CLIP-benchmark sets in {out / 'wds'}")
    return out


def entry() -> None:
    """Console script ``clipmag-make-clip-shards``."""
    run_entry_point(main)
