"""The emoji image-text set: Noto colour emoji with their Unicode names, CLDR keywords and names in
other languages, a zero-shot task over the CLDR emoji subgroups, and the same test emoji in grey as a
shifted domain. Every part is a pinned Debian package (:mod:`image_text.data.debian`); no one in this
project drew, named or grouped an emoji.

Why this set (docs/clip.md, "The emoji set"): the digits' ten classes are at their ceiling, so
heads cannot differ on zero-shot there. Here an image is one emoji (``fonts-noto-color-emoji``,
rendered with Pillow at the font's bitmap size, 109, on white), its texts are its English name from
``emoji-test.txt`` (``unicode-data``), its English keywords and its names in ``EXTRA_LANGUAGES`` from
CLDR's annotations (``unicode-cldr-core``); the 58 zero-shot classes are the subgroups of
``emoji-test.txt`` merged by their head word (``face-smiling`` and ``face-tongue`` are ``face``;
``cat-face`` stays ``cat face``), scored on held-out emoji of those classes.

Zero-shot is zero-shot: no text of any split names an emoji's class, so no training text equals or
contains a zero-shot prompt (``prompt_leaks`` checks every template x every class against every
training text, and the build refuses a set with one); the class is read from the names' own words
("grinning face", "flag: Norway") or not at all. The templates carry no "{c}" alone, which a name
would contain ("face" in "grinning face").

Skin-tone variants of one emoji differ only in colour, so the split is by *base* emoji (the sequence
without skin-tone modifiers): a base and all its variants land in one split; validation and test keep
each base once (its default, yellow form). The held-out splits are then cleaned for retrieval: an
image whose pixels nearly equal an image of an earlier split (training, then validation) or of its
own split is dropped (Noto draws several territories with one flag: Bouvet Island is Svalbard &
Jan Mayen's), and a caption that several images of a held-out split share is dropped from all of
them, so each test caption belongs to exactly one image (:mod:`image_text.data.near_duplicates`).
The shifted domain draws the test emoji in grey (Noto's bitmap, its luminance only): the same shapes
without the colour the towers also learned from.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from clipmag.errors import UserError

from .debian import load_pins, unpacked
from .near_duplicates import near_duplicate_rows, without_shared_captions
from .prompts import zero_shot_prompts
from .shards import Sample

PACKAGES = ("fonts-noto-color-emoji", "unicode-cldr-core", "unicode-data")
EMOJI_TEST = "usr/share/unicode/emoji/emoji-test.txt"
NOTO = "usr/share/fonts/truetype/noto/NotoColorEmoji.ttf"
ANNOTATIONS = ("usr/share/unicode/cldr/common/annotations", "usr/share/unicode/cldr/common/annotationsDerived")
NOTO_SIZE = 109  # the size of the font's embedded colour bitmaps, the only size a CBDT font draws
EXTRA_LANGUAGES = ("de", "es", "fr")
SKIN_TONES = frozenset(chr(c) for c in range(0x1F3FB, 0x1F400))
VARIATION_SELECTOR = "\ufe0f"
SKIPPED_GROUPS = ("Component",)  # bare skin-tone swatches and hair parts, not emoji of their own
# no template is "{c}" alone (a name holds its class word) and none needs "a" / "an" before a class
TEMPLATES = ("the {c} emoji", "an emoji of the kind {c}", "an emoji from the group {c}")
_LINE = re.compile(r"^([0-9A-F ]+?)\s*;\s*fully-qualified\s*#\s*\S+\s+E\d+\.\d+\s+(.+)$")


@dataclass(frozen=True)
class Emoji:
    """One fully-qualified emoji of ``emoji-test.txt``: its characters, English name and subgroup."""

    sequence: str
    name: str
    group: str
    subgroup: str

    @property
    def base(self) -> str:
        """The sequence without skin tones or variation selectors: what its variants share."""
        return "".join(c for c in self.sequence if c not in SKIN_TONES and c != VARIATION_SELECTOR)


def read_emoji_test(path: Path) -> list[Emoji]:
    """The fully-qualified emoji of ``emoji-test.txt`` in its order, without ``SKIPPED_GROUPS``."""
    out, group, subgroup = [], "", ""
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# group:"):
            group = line.split(":", 1)[1].strip()
        elif line.startswith("# subgroup:"):
            subgroup = line.split(":", 1)[1].strip()
        elif (found := _LINE.match(line)) and group not in SKIPPED_GROUPS:
            sequence = "".join(chr(int(code, 16)) for code in found.group(1).split())
            out.append(Emoji(sequence, found.group(2).strip(), group, subgroup))
    if not out:
        raise UserError(f"{path}: no fully-qualified emoji; the unicode-data package is not what was pinned")
    return out


def read_annotations(cldr: Path, language: str) -> dict[str, tuple[str | None, list[str]]]:
    """CLDR's annotations of ``language`` (its derived file included): emoji without variation
    selectors -> (spoken name or None, keywords)."""
    names: dict[str, str] = {}
    keywords: dict[str, list[str]] = {}
    for folder in ANNOTATIONS:
        path = cldr / folder / f"{language}.xml"
        if not path.is_file():
            continue
        for node in ElementTree.parse(path).getroot().iter("annotation"):
            key, text = node.get("cp", "").replace(VARIATION_SELECTOR, ""), (node.text or "").strip()
            if not text or text == "↑↑↑":  # CLDR's mark for "inherit from the parent locale"
                continue
            if node.get("type") == "tts":
                names[key] = text
            else:
                keywords[key] = [k.strip() for k in text.split("|") if k.strip()]
    return {key: (names.get(key), keywords.get(key, [])) for key in names.keys() | keywords.keys()}


def class_name(subgroup: str, siblings: dict[str, int]) -> str:
    """The zero-shot class of a subgroup, as words: its head word where several subgroups share it
    (``face-smiling`` and ``face-tongue`` -> ``face``), else the whole subgroup (``cat-face`` ->
    ``cat face``). ``siblings`` counts the subgroups under each head word."""
    head = subgroup.split("-")[0]
    return head if siblings[head] > 1 else subgroup.replace("-", " ")


def head_word_counts(emoji: Sequence[Emoji]) -> dict[str, int]:
    """How many subgroups of ``emoji`` share each head word (the part before the first hyphen)."""
    return Counter(subgroup.split("-")[0] for subgroup in dict.fromkeys(e.subgroup for e in emoji))


def texts_of(emoji: Emoji, annotations: dict[str, dict[str, tuple[str | None, list[str]]]]) -> list[str]:
    """Every text of an emoji: its English name, the name with its CLDR keywords, its names in
    ``EXTRA_LANGUAGES``. None names the emoji's class: zero-shot prompts must be new to the model."""
    key = emoji.sequence.replace(VARIATION_SELECTOR, "")
    name, words = annotations["en"].get(key, (None, []))
    name = name or emoji.name
    out = [name, f"{name}: {', '.join(words)}" if words else None]
    out += [annotations[lang].get(key, (None, []))[0] for lang in EXTRA_LANGUAGES]
    return list(dict.fromkeys(t for t in out if t))


def prompt_leaks(texts: Iterable[str], prompts: Sequence[str]) -> list[tuple[str, str]]:
    """Every (text, prompt) where the text equals or contains the prompt, case and spacing aside:
    a training text that holds a zero-shot prompt makes zero-shot a supervised task."""
    folded = [" ".join(p.lower().split()) for p in prompts]
    return [(text, prompt) for text in texts for prompt in folded if prompt in " ".join(text.lower().split())]


def split_by_base(
    emoji: Sequence[Emoji], val_fraction: float, test_fraction: float, seed: int
) -> dict[str, list[Emoji]]:
    """A seeded train / val / test split of the base emoji, each with all its skin-tone variants."""
    bases = list(dict.fromkeys(e.base for e in emoji))
    order = [bases[i] for i in np.random.default_rng(seed).permutation(len(bases))]
    n_test, n_val = round(len(bases) * test_fraction), round(len(bases) * val_fraction)
    side = {b: "test" for b in order[:n_test]} | {b: "val" for b in order[n_test : n_test + n_val]}
    out: dict[str, list[Emoji]] = {"train": [], "val": [], "test": []}
    for e in emoji:
        out[side.get(e.base, "train")].append(e)
    return out


def _on_white(glyph: Image.Image, size: int) -> Image.Image:
    """A drawn glyph cropped to its ink, centred on a white square, scaled to ``size``."""
    box = glyph.getbbox()
    if box is None:
        raise UserError("an emoji drew nothing; the font package is not what was pinned")
    glyph = glyph.crop(box)
    side = max(glyph.size)
    square = Image.new("RGBA", (side, side), (255, 255, 255, 255))
    square.alpha_composite(glyph, ((side - glyph.width) // 2, (side - glyph.height) // 2))
    return square.convert("RGB").resize((size, size), Image.Resampling.LANCZOS)


class Renderer:
    """Draws emoji with Noto's colour bitmaps."""

    def __init__(self, font: Path, size: int) -> None:
        self.font = ImageFont.truetype(str(font), size)
        self.advance = self.font.getlength("\U0001f600")

    def draws_as_one(self, sequence: str) -> bool:
        """Whether the font draws ``sequence`` as one glyph (a flag or a ZWJ family is one only
        with Pillow's raqm layout)."""
        return self.font.getlength(sequence) <= 1.2 * self.advance

    def image(self, sequence: str, size: int) -> Image.Image:
        """``sequence`` drawn with a margin, on white, ``size`` pixels square."""
        *_, right, bottom = self.font.getbbox(sequence)
        canvas = Image.new("RGBA", (right + 4, bottom + 4), (0, 0, 0, 0))
        ImageDraw.Draw(canvas).text((2, 2), sequence, font=self.font, fill="black", embedded_color=True)
        return _on_white(canvas, size)


def in_grey(sample: Sample) -> Sample:
    """The shifted domain's sample: the same emoji, texts and class, its image's luminance only."""
    return sample._replace(key=sample.key.replace("noto-", "grey-", 1), image=sample.image.convert("L").convert("RGB"))


@dataclass
class EmojiSet:
    """What the shard builder writes: the three splits, the zero-shot images (the test split),
    the shifted domain's test images, the classes and templates, and how the split was made."""

    splits: dict[str, list[Sample]]
    shifted: list[Sample]
    classnames: list[str]
    templates: list[str]
    record: dict[str, object]


def cleaned_held_out(splits: dict[str, list[Sample]]) -> dict[str, dict[str, list[str]]]:
    """Clean validation and test in place for retrieval (:mod:`image_text.data.near_duplicates`): drop an
    image that nearly repeats one of training, of validation (for test) or of its own split, then
    every caption several images of the split share (and an image left with none); returns the keys
    and captions that went, per split."""
    removed: dict[str, dict[str, list[str]]] = {}
    earlier = [s.image for s in splits["train"]]
    for split in ("val", "test"):
        repeats = set(near_duplicate_rows([s.image for s in splits[split]], earlier))
        kept = [s for row, s in enumerate(splits[split]) if row not in repeats]
        near = [s.key for row, s in enumerate(splits[split]) if row in repeats]
        splits[split], shared = without_shared_captions(kept)
        removed[split] = {
            "near_duplicate_images": near,
            "shared_captions": shared,
            "captionless_images": sorted({s.key for s in kept} - {s.key for s in splits[split]}),
        }
        earlier += [s.image for s in splits[split]]
    return removed


def build_emoji(
    cache: Path | None, image_size: int, val_fraction: float, test_fraction: float, seed: int, limit: int | None
) -> EmojiSet:
    """Fetch the pinned packages (once; :func:`image_text.data.debian.unpacked`) and draw the set.
    ``limit`` keeps that many base emoji with their variants (a seeded choice; every class stays named)
    for a small set."""
    pins = load_pins()
    root = {name: unpacked(pins[name], cache) for name in PACKAGES}
    emoji = read_emoji_test(root["unicode-data"] / EMOJI_TEST)
    siblings = head_word_counts(emoji)
    classnames = list(dict.fromkeys(class_name(e.subgroup, siblings) for e in emoji))
    label = {name: i for i, name in enumerate(classnames)}
    if limit is not None:
        n_bases = len({e.base for e in emoji})
        kept = set(split_by_base(emoji, 0.0, min(1.0, limit / n_bases), seed + 1)["test"])
        emoji = [e for e in emoji if e in kept]
    annotations = {lang: read_annotations(root["unicode-cldr-core"], lang) for lang in ("en", *EXTRA_LANGUAGES)}
    noto = Renderer(root["fonts-noto-color-emoji"] / NOTO, NOTO_SIZE)
    if not noto.draws_as_one("\U0001f1e9\U0001f1ea"):
        raise UserError("this Pillow draws a flag as two letters: it lacks raqm layout; install a Pillow wheel with it")
    by_split = split_by_base(emoji, val_fraction, test_fraction, seed)
    for held_out in ("val", "test"):  # each base once: its variants would be near-duplicate queries
        by_split[held_out] = [e for e in by_split[held_out] if not SKIN_TONES.intersection(e.sequence)]

    def sample(e: Emoji) -> Sample:
        key = "noto-" + "-".join(f"{ord(c):x}" for c in e.sequence)
        category = class_name(e.subgroup, siblings)
        return Sample(key, noto.image(e.sequence, image_size), texts_of(e, annotations), label[category])

    splits = {split: [sample(e) for e in part] for split, part in by_split.items()}
    leaks = prompt_leaks((c for s in splits["train"] for c in s.captions), zero_shot_prompts(classnames, TEMPLATES))
    if leaks:
        text, prompt = leaks[0]
        raise UserError(f"training text {text!r} holds the zero-shot prompt {prompt!r}: change TEMPLATES in {__file__}")
    removed = cleaned_held_out(splits)
    versions = {name: pins[name].version for name in PACKAGES}
    rule = (
        f"random by base emoji (skin-tone variants together): val {val_fraction}, test {test_fraction}, seed {seed}"
        + (f"; {limit} base emoji kept" if limit is not None else "")
        + "; validation and test without images that repeat an earlier split's (near_duplicates.py) and without "
        "captions two of their images share (removed)"
    )
    record = {"source": f"debian packages {versions}", "rule": rule, "removed": removed}
    return EmojiSet(splits, [in_grey(s) for s in splits["test"]], classnames, list(TEMPLATES), record)
