"""The image-text data path: captions grouped per image, splits by image, the COCO/Flickr
preparation (network mocked), the resumable shard stream with augmentation, and evaluation sets."""

from __future__ import annotations

import io
import json
import tarfile
import urllib.request
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from clip_fixtures import write_digit_shards
from PIL import Image

from clipmag.errors import UserError
from clipmag.runtime.distributed import DistributedContext
from clipmag.storage.shards import read_samples
from image_text.cli import parse_args
from image_text.data import download, shards_cli, sources
from image_text.data.reading import read_eval_set
from image_text.data.stream import ClipShardStream
from image_text.model.architecture import build_open_clip
from image_text.model.config import ClipModelConfig
from image_text.task import ClipTask


def _png(seed: int, ext: str = "PNG") -> bytes:
    pixels = np.random.default_rng(seed).integers(0, 255, size=(16, 16, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format=ext)
    return buf.getvalue()


def _keys_and_captions(folder: Path) -> dict[str, list[str]]:
    out = {}
    for shard in sorted(folder.glob("*.tar")):
        for sample in read_samples(str(shard)):
            out[sample["__key__"]] = sample["txt"].decode().splitlines()
    return out


@pytest.fixture(scope="module")
def micro():
    _, preprocess_train, preprocess_val, tokenizer = build_open_clip(ClipModelConfig(name="clipmag-micro"))
    return preprocess_train, preprocess_val, tokenizer


def test_captions_file_is_grouped_per_image_and_split_by_image(tmp_path):
    images = tmp_path / "images"
    images.mkdir()
    lines = []
    for i in range(40):
        (images / f"img{i}.png").write_bytes(_png(i))
        lines += [f"img{i}.png\tcaption {j} of image {i}\t{i % 3}" for j in range(1 + i % 4)]
    lines.append("img0.png\tone more caption of image 0\t0")  # captions of one image need not be adjacent
    (tmp_path / "captions.tsv").write_text("\n".join(lines) + "\n")
    out = tmp_path / "data"
    argv = ["--output", str(out), "--images", str(images), "--captions", str(tmp_path / "captions.tsv")]
    shards_cli.main([*argv, "--val-fraction", "0.2", "--test-fraction", "0.25", "--shard-size", "7"])
    record = json.loads((out / "splits.json").read_text())
    keys = {split: _keys_and_captions(out / split) for split in ("train", "val", "test")}
    assert [len(keys[s]) for s in ("train", "val", "test")] == [22, 8, 10]
    assert {s: sorted(v) for s, v in keys.items()} == {s: sorted(v) for s, v in record["images"].items()}
    assert not (keys["train"].keys() & keys["val"].keys() or keys["train"].keys() & keys["test"].keys())
    assert not keys["val"].keys() & keys["test"].keys()
    names = record["names"]
    for split in keys.values():
        for key, captions in split.items():
            i = int(names[key].removeprefix("img").removesuffix(".png"))
            assert captions[: 1 + i % 4] == [f"caption {j} of image {i}" for j in range(1 + i % 4)]
    assert keys["train"].get("00000000", keys["val"].get("00000000", keys["test"].get("00000000")))[-1] == (
        "one more caption of image 0"
    )
    benchmark = _keys_and_captions(out / "wds" / "data_retrieval" / "test")
    assert benchmark == keys["test"]  # CLIP-benchmark's copy holds every caption of every test image
    with pytest.raises(UserError, match="--overwrite"):  # one line from the console script, no traceback
        shards_cli.main(argv)
    (tmp_path / "bad.tsv").write_text("img1.png\ta\t1\nimg2.png\tb\t2\nimg1.png\tc\t2\n")
    with pytest.raises(ValueError, match=r"bad.tsv:3: img1.png has class 2, but line 1 gave it class 1"):
        sources.read_caption_file(tmp_path / "bad.tsv")


def _karpathy_zip(dataset: str, images: list[tuple[str, str, str]]) -> bytes:
    entries = [
        {
            "filepath": folder,
            "filename": name,
            "split": split,
            "sentences": [{"raw": f"{name} says {j} "} for j in range(5)],
        }
        for folder, name, split in images
    ]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr(f"data/{dataset}", json.dumps({"images": entries, "dataset": "coco"}))
    return buf.getvalue()


def _image_zip(folder: str, names: list[str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for i, name in enumerate(names):
            zf.writestr(f"{folder}/{name}", _png(i, "JPEG"))
    return buf.getvalue()


class _Response(io.BytesIO):
    headers: dict[str, str] = {}


def test_coco_download_and_karpathy_split(tmp_path, monkeypatch):
    layout = [("train2014", f"t{i}.jpg", "train") for i in range(6)] + [
        ("val2014", f"v{i}.jpg", s) for i, s in enumerate(["restval"] * 2 + ["val"] * 3 + ["test"] * 4)
    ]
    served = {
        download.KARPATHY_URL: _karpathy_zip("dataset_coco.json", layout),
        download.DATASETS["coco"].image_zips["train2014"]: _image_zip(
            "train2014", [n for f, n, _ in layout if f == "train2014"]
        ),
        download.DATASETS["coco"].image_zips["val2014"]: _image_zip(
            "val2014", [n for f, n, _ in layout if f == "val2014"]
        ),
    }
    asked = []

    def urlopen(url, timeout=None):
        asked.append(url)
        return _Response(served[url])

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    raw, out = tmp_path / "raw", tmp_path / "coco"
    shards_cli.main(["--output", str(out), "--images", str(raw), "--download", "coco", "--shard-size", "4"])
    assert sorted(asked) == sorted(served) and not list(raw.glob("*2014.zip"))
    record = json.loads((out / "splits.json").read_text())
    assert record["counts"] == {
        "train": {"images": 8, "captions": 40},
        "val": {"images": 3, "captions": 15},
        "test": {"images": 4, "captions": 20},
    }
    assert sorted(record["names"][k] for k in record["images"]["test"]) == [f"val2014/v{i}.jpg" for i in range(5, 9)]
    test = _keys_and_captions(out / "test")
    assert all(c == [f"{Path(record['names'][k]).name} says {j}" for j in range(5)] for k, c in test.items())
    with tarfile.open(out / "test" / "shard-000000.tar") as tar:
        assert any(m.name.endswith(".jpg") for m in tar.getmembers())  # photos are copied, not re-encoded

    asked.clear()
    download.download("coco", raw)  # everything present: nothing is fetched again
    assert asked == []

    def offline(url, timeout=None):
        raise urllib.error.URLError("no route to host")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    with pytest.raises(FileNotFoundError, match="dataset_flickr30k.json|caption_datasets.zip.*fetch it on a machine"):
        download.download("flickr30k", tmp_path / "flickr")
    assert not list((tmp_path / "flickr").glob("*partial*"))  # the temporary file of the failed fetch is gone


@pytest.fixture(scope="module")
def digit_shards(tmp_path_factory) -> Path:
    return write_digit_shards(tmp_path_factory.mktemp("digits"), 60, 12, 20, per_class=1, shard_size=8)


def _take(batches, n: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [next(batches) for _ in range(n)]


def _same(a, b) -> bool:
    return all(torch.equal(x, y) for pa, pb in zip(a, b) for x, y in zip(pa, pb))


@pytest.mark.parametrize("workers", [0, 2])
def test_shard_stream_resumes_by_counts_with_augmentation(digit_shards, micro, workers):
    preprocess_train, _, tokenizer = micro
    stream = ClipShardStream(str(digit_shards / "train"), preprocess_train, tokenizer, 5, seed=3, workers=workers)
    straight = _take(stream.batches(0), 30)  # 150 samples: two and a half epochs over 8 shards of 60 images
    assert _same(straight[17:], _take(stream.batches(17), 13))
    if workers:
        return
    again = ClipShardStream(str(digit_shards / "train"), preprocess_train, tokenizer, 5, seed=3)
    torch.manual_seed(1234)  # augmentation is seeded per sample, so the global RNG plays no part
    assert _same(straight, _take(again.batches(0), 30))
    plain = ClipShardStream(str(digit_shards / "train"), micro[1], tokenizer, 5, seed=3)
    first = _take(plain.batches(0), 1)[0]
    assert torch.equal(first[1], straight[0][1]) and not torch.equal(first[0], straight[0][0])  # crops differ
    assert not torch.equal(
        straight[0][0],
        _take(ClipShardStream(str(digit_shards / "train"), preprocess_train, tokenizer, 5, seed=4).batches(0), 1)[0][0],
    )
    ranks = [
        ClipShardStream(str(digit_shards / "train"), preprocess_train, tokenizer, 5, 3, rank=r, world_size=2)
        for r in (0, 1)
    ]
    assert _same(_take(ranks[1].batches(4), 3), _take(ranks[1].batches(0), 7)[4:])
    # two ranks of batch 5 are, slice by slice and crop by crop, one process of batch 10
    one = _take(ClipShardStream(str(digit_shards / "train"), preprocess_train, tokenizer, 10, 3).batches(5), 10)
    parts = [_take(rank.batches(5), 10) for rank in ranks]
    assert _same(one, [tuple(torch.cat(p) for p in zip(a, b)) for a, b in zip(*parts)])


def test_shard_stream_draws_a_caption_per_image_per_epoch(digit_shards, micro):
    _, preprocess_val, tokenizer = micro
    captions = _keys_and_captions(digit_shards / "train")
    tokens = {tuple(tokenizer(c)[0].tolist()): key for key, cs in captions.items() for c in cs}
    stream = ClipShardStream(str(digit_shards / "train"), preprocess_val, tokenizer, 6, seed=0)
    epochs = [_take(stream.batches(10 * e), 10) for e in range(3)]  # 60 images: 10 batches per epoch
    seen = [[tokens[tuple(t.tolist())] for _, batch in epoch for t in batch] for epoch in epochs]
    assert all(sorted(keys) == sorted(captions) for keys in seen)  # every image exactly once per epoch
    drawn = [{tuple(t.tolist()) for _, batch in epoch for t in batch} for epoch in epochs]
    assert drawn[0] != drawn[1] != drawn[2]  # a new caption draw each epoch


def test_eval_set_keeps_every_caption_with_its_image(digit_shards, micro):
    _, preprocess_val, tokenizer = micro
    data = read_eval_set(str(digit_shards / "test"), preprocess_val, tokenizer, "data.test")
    captions = _keys_and_captions(digit_shards / "test")
    assert data.name == digit_shards.name and len(data.images) == 20 and len(data.texts) == 100
    for row, key in enumerate(captions):
        assert [t for t, o in zip(data.texts, data.image_of_text.tolist()) if o == row] == captions[key]
    assert torch.equal(data.tokens, tokenizer(data.texts))


def test_bundled_batches_draw_captions_per_epoch_resume_and_split_across_ranks():
    def task(batch_size: int, rank: int = 0, world_size: int = 1) -> ClipTask:
        sizes = [
            f"data.bundled.{split}={n}"
            for split, n in (("train", 40), ("validation", 4), ("test", 4), ("per_class", 1))
        ]
        cfg = parse_args(["model.name=clipmag-micro", *sizes, f"data.batch_size={batch_size}"])
        return ClipTask(cfg, DistributedContext(rank, world_size, rank, torch.device("cpu"), None))

    one = task(8)
    straight = _take(one.train_batches(0), 15)  # 5 batches per epoch
    assert _same(straight[7:], _take(one.train_batches(7), 8))
    drawn: dict[bytes, set[tuple[int, ...]]] = {}
    for images, tokens in straight:
        for image, caption in zip(images, tokens):
            drawn.setdefault(image.numpy().tobytes(), set()).add(tuple(caption.tolist()))
    allowed = {tuple(t.tolist()) for t in one.train_tokens.flatten(0, 1)}
    assert len(drawn) == 40 and set().union(*drawn.values()) <= allowed
    assert sum(len(c) > 1 for c in drawn.values()) > 20  # most images got another caption in another epoch
    two = [_take(task(4, r, 2).train_batches(0), 15) for r in (0, 1)]
    assert _same(straight, [tuple(torch.cat(p) for p in zip(a, b)) for a, b in zip(*two)])


@pytest.mark.parametrize("n_train", [40, 160])
def test_bundled_shard_build_writes_each_caption_once(tmp_path, monkeypatch, capsys, n_train):
    """The builder is linear in its input: every composite's captions are written exactly once
    (taking them from the whole split per sample made the build quadratic), and it reports each
    shard as it goes."""
    from image_text.data import bundled

    calls = []
    real = bundled.captions_for
    monkeypatch.setattr(bundled, "captions_for", lambda digits: calls.append(1) or real(digits))
    sizes = ["--bundled-train", str(n_train), "--bundled-validation", "8", "--bundled-test", "12"]
    sizes += ["--bundled-per-class", "2"]
    shards_cli.main(["--output", str(tmp_path / "digits"), "--bundled", *sizes, "--shard-size", "20"])
    assert len(calls) == n_train + 8 + 12 + 10 * 2
    lines = capsys.readouterr().out.splitlines()
    assert f"train: 20/{n_train} images written" in lines and f"train: {n_train}/{n_train} images written" in lines
