"""The emoji image-text set, built small from the pinned Debian packages (fetched with apt-get into
the user cache on first use; skipped, saying why, only where no Debian mirror answers): split by
base emoji, several texts per image, no training text holding a zero-shot prompt, each test caption
one image's, its floors stored beside it, CLIP-benchmark's own reader takes its zero-shot and
retrieval sets and the shifted domain's, and a package whose hash is not the pinned one is refused."""

from __future__ import annotations

import json
import tarfile
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from clip_benchmark.datasets.builder import build_dataset
from PIL import Image

from clipmag.errors import UserError
from clipmag_experiments.report.floors import floors_table
from clipmag_experiments.sweep import floors
from clipmag_experiments.sweep.archive import archive_results
from clipmag_experiments.sweep.caption_layout import read_caption_layouts, write_caption_layout
from clipmag_experiments.sweep.floors import read_floors
from image_text.data import debian, emoji, shards_cli
from image_text.data.prompts import zero_shot_prompts
from image_text.data.reading import read_eval_set

SKIN_AND_SELECTOR = {f"{c:x}" for c in range(0x1F3FB, 0x1F400)} | {"fe0f"}


def base_key(key: str) -> str:
    """A sample key (``noto-1f44b-1f3fb``) as its base emoji's code points."""
    return "-".join(code for code in key.split("-")[1:] if code not in SKIN_AND_SELECTOR)


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("emoji")
    args = ["--emoji", "--output", str(out), "--emoji-limit", "100", "--emoji-size", "32"]
    try:
        shards_cli.main([*args, "--val-fraction", "0.1", "--test-fraction", "0.3", "--shard-size", "50"])
    except debian.PackageUnavailable as err:
        pytest.skip(f"the pinned Debian packages cannot be fetched here: {err}")
    return out


def test_splits_share_no_base_emoji_and_every_image_has_several_texts(small):
    record = json.loads((small / "splits.json").read_text())
    bases = {split: {base_key(k) for k in keys} for split, keys in record["images"].items()}
    for held_out in ("val", "test"):  # each base once there: no recoloured twin among the queries
        assert len(bases[held_out]) == len(record["images"][held_out])
    assert all(bases[split] for split in ("train", "val", "test"))
    assert not (bases["train"] & bases["val"] or bases["train"] & bases["test"] or bases["val"] & bases["test"])
    counts = record["counts"]
    assert sum(c["captions"] for c in counts.values()) >= 3 * sum(c["images"] for c in counts.values())
    assert "unicode-data" in record["source"] and "seed 0" in record["rule"]


def test_clip_benchmark_reads_zero_shot_and_retrieval_sets(small):
    classes = (small / "classnames.txt").read_text().splitlines()
    assert len(classes) >= 50 and {"animal", "face", "cat face", "country flag"} <= set(classes)
    test_keys = set(json.loads((small / "splits.json").read_text())["images"]["test"])
    zero_shot = build_dataset("wds/emoji_classification", root=f"{small}/wds/emoji_classification", transform=None)
    assert zero_shot.classes == classes and zero_shot.templates == list(emoji.TEMPLATES)
    labels = [label for _, label in zero_shot]
    assert len(labels) == len(test_keys) and all(0 <= label < len(classes) for label in labels)
    retrieval = build_dataset(
        "wds/emoji_retrieval", root=f"{small}/wds/emoji_retrieval", transform=None, task="zeroshot_retrieval"
    )
    image, texts = next(iter(retrieval))
    assert isinstance(image, Image.Image) and image.size == (32, 32) and len(texts) >= 3
    shifted = build_dataset(
        "wds/emoji_grey_classification", root=f"{small}/wds/emoji_grey_classification", transform=None
    )
    drawn = [np.asarray(image) for image, _ in shifted]  # the test emoji in grey: every pixel's channels equal
    assert drawn and all((a[..., 0] == a[..., 1]).all() and (a[..., 1] == a[..., 2]).all() for a in drawn)
    assert [label for _, label in shifted] == labels


def _captions(split: Path) -> dict[str, list[str]]:
    """Every sample's captions in a split's shards, by key."""
    out = {}
    for shard in sorted(split.glob("*.tar")):
        with tarfile.open(shard) as tar:
            for member in tar.getmembers():
                if member.name.endswith(".txt"):
                    out[member.name[: -len(".txt")]] = tar.extractfile(member).read().decode().splitlines()
    return out


def test_no_training_text_holds_a_zero_shot_prompt(small):
    classes = (small / "classnames.txt").read_text().splitlines()
    templates = (small / "templates.txt").read_text().splitlines()
    prompts = [p.lower() for p in zero_shot_prompts(classes, templates)]
    texts = [t.lower() for captions in _captions(small / "train").values() for t in captions]
    assert len(prompts) == len(classes) * len(templates) and texts
    assert not [(t, p) for t in texts for p in prompts if p in t]
    assert emoji.prompt_leaks(["I saw the FACE  emoji: grinning face"], ["the face emoji"]) == [
        ("I saw the FACE  emoji: grinning face", "the face emoji")
    ]


def test_each_held_out_caption_belongs_to_one_image_and_the_floors_are_stored(small):
    for split in ("val", "test"):
        owners = Counter(
            " ".join(c.lower().split()) for captions in _captions(small / split).values() for c in captions
        )
        assert owners and max(owners.values()) == 1, split
    baselines = json.loads((small / "baselines.json").read_text())
    assert set(baselines) == {"val", "test", "grey"}
    test = baselines["test"]
    assert test["images"] == len(json.loads((small / "splits.json").read_text())["images"]["test"])
    floors = test["zero_shot"]
    assert floors["chance"]["acc1"] == pytest.approx(1 / 58)
    assert floors["majority_class"]["acc1"] > floors["chance"]["acc1"]
    assert 0 < floors["pixel_nearest_neighbour"]["acc1"] <= 1
    assert test["retrieval_random_ranking"]["t2i_r1"] == pytest.approx(1 / test["images"])


def test_texts_are_names_keywords_and_other_languages_never_the_class():
    pins = debian.load_pins()
    try:
        cldr = debian.unpacked(pins["unicode-cldr-core"])
    except debian.PackageUnavailable as err:
        pytest.skip(f"the pinned Debian packages cannot be fetched here: {err}")
    annotations = {lang: emoji.read_annotations(cldr, lang) for lang in ("en", *emoji.EXTRA_LANGUAGES)}
    wave = emoji.Emoji("\U0001f44b\U0001f3fb", "waving hand: light skin tone", "People & Body", "hand-fingers-open")
    texts = emoji.texts_of(wave, annotations)
    assert texts[:2] == [
        "waving hand: light skin tone",
        "waving hand: light skin tone: hand, light skin tone, wave, waving",
    ]
    assert len(texts) == 2 + len(emoji.EXTRA_LANGUAGES) and wave.base == "\U0001f44b"


def test_classes_are_subgroups_merged_by_their_head_word():
    def made(*subgroups: str) -> list[emoji.Emoji]:
        return [emoji.Emoji(chr(0x1F600 + i), "x", "g", s) for i, s in enumerate(subgroups)]

    siblings = emoji.head_word_counts(made("face-smiling", "face-tongue", "cat-face", "animal-mammal"))
    assert emoji.class_name("face-tongue", siblings) == "face"
    assert emoji.class_name("cat-face", siblings) == "cat face"
    assert emoji.class_name("animal-mammal", siblings) == "animal mammal"  # no sibling: the whole subgroup


def test_a_package_that_is_not_the_pinned_one_is_refused(tmp_path):
    pin = debian.load_pins()["unicode-data"]
    wrong = replace(pin, sha256="0" * 64)
    try:
        with pytest.raises(UserError, match=f"{pin.file}: sha256 {pin.sha256}, pinned 0000"):
            debian.unpacked(wrong, tmp_path)
    except debian.PackageUnavailable as err:
        pytest.skip(f"the pinned Debian packages cannot be fetched here: {err}")
    assert not (tmp_path / pin.file).exists() and not (tmp_path / f"{pin.name}_{pin.version}").exists()


def test_the_caption_layout_names_each_captions_image_as_the_evaluation_reads_them(small, tmp_path):
    """The report's grouping of older runs' captions comes from the shards, in the evaluation's order."""
    write_caption_layout(tmp_path, [str(small / "test")])
    (layout,) = read_caption_layouts(tmp_path).values()
    evaluated = read_eval_set(str(small / "test"), lambda image: torch.zeros(1), lambda texts: texts, "data.test")
    assert layout == evaluated.image_of_text.tolist() and len(set(layout)) == len(evaluated.images)
    assert len(layout) > len(evaluated.images)  # several captions an image, unevenly


def test_the_floors_travel_with_a_sweep_and_print_under_its_tables(small, tmp_path):
    runs, archived = tmp_path / "runs", tmp_path / "results"
    floors.main([str(small / "baselines.json"), str(runs)])
    archive_results(runs, archived)
    stored = read_floors(archived)
    assert stored == json.loads((small / "baselines.json").read_text())
    table = floors_table(stored)
    pixel = 100 * stored["test"]["zero_shot"]["pixel_nearest_neighbour"]["acc1"]
    assert f"| pixel nearest neighbour | test | {stored['test']['images']} | {pixel:.2f} |" in table
    assert "| grey |" in table and "| val |" not in table
