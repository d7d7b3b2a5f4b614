"""Data and cache faults heal or explain themselves: a damaged corpus cache is rebuilt, an incomplete
BRIGHT root, unbuilt training data and a broken image are errors naming the file and the fix, the
image-text splits are compared by resolved shard file, and empty texts are counted at evaluation."""

from __future__ import annotations

import io
import json
import logging
import re
import shutil
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch
from bright_fixtures import download_all_settings, write_hub_tree
from clip_fixtures import write_digit_shards
from text_fixtures import minilm_encoder, write_code_search_set

from clipmag.errors import ConfigError
from clipmag.runtime.distributed import DistributedContext
from clipmag.scoring.heads import build_head
from clipmag.storage.shards import ShardError, write_tar_shards
from image_text.cli import parse_args
from image_text.data.reading import read_eval_set
from image_text.data.stream import ClipShardStream
from image_text.model.architecture import build_open_clip
from image_text.model.config import ClipModelConfig
from image_text.task import ClipTask
from text_retrieval.data.loaders import EvalSettings, RetrievalDataset, load_eval_datasets
from text_retrieval.data.shards_cli import main as make_shards_main
from text_retrieval.data.training.shards import TextShardStream
from text_retrieval.evaluation.bright_scores import bright_summary
from text_retrieval.evaluation.evaluate import evaluate_retrieval
from text_retrieval.retrieval import corpus_cache
from text_retrieval.retrieval.corpus_cache import DamagedCacheError, encode_corpus
from text_retrieval.retrieval.index import RetrievalSettings
from text_retrieval.retrieval.search import ExactIndex

# ---- a damaged corpus cache ------------------------------------------------------------------------


class _Encoder:
    """Just enough of TextEncoder for the corpus cache; counts its encode calls."""

    name_or_path, pooling, document_prefix, document_max_length, dim = "fake/model", "mean", "", 16, 4
    precision, device = "fp32", torch.device("cpu")

    def __init__(self) -> None:
        self.calls = 0

    def weights_fingerprint(self) -> str:
        return "w0"

    def encode(self, texts, side, batch_size=64, show_progress=True):
        self.calls += 1
        return np.array([[len(t), i, 1.5, -len(t) / 3] for i, t in enumerate(texts)], dtype=np.float32)


TEXTS = [f"passage {i} " * (i % 4 + 1) for i in range(23)]
SETTINGS = RetrievalSettings(chunk_size=5, cache_dtype="fp16")


def _truncate(folder: Path) -> None:
    path = folder / "embeddings.npy"
    path.write_bytes(path.read_bytes()[:-10])


def _cut_to_header(folder: Path) -> None:
    path = folder / "embeddings.npy"
    path.write_bytes(path.read_bytes()[:60])


def _corrupt_header(folder: Path) -> None:
    path = folder / "embeddings.npy"
    data = bytearray(path.read_bytes())
    data[10:50] = b"\xff" * 40
    path.write_bytes(bytes(data))


def _append(folder: Path) -> None:
    with open(folder / "embeddings.npy", "ab") as fh:
        fh.write(b"\0" * 64)


def _miscount(folder: Path) -> None:
    record = json.loads((folder / "identity.json").read_text())
    record["num_documents"] += 1
    (folder / "identity.json").write_text(json.dumps(record))


@pytest.mark.parametrize("damage", [_truncate, _cut_to_header, _corrupt_header, _append, _miscount])
def test_a_damaged_finished_cache_is_named_and_rebuilt(damage, tmp_path, caplog):
    fresh = np.array(encode_corpus(_Encoder(), TEXTS, tmp_path / "fresh", "toy", settings=SETTINGS))
    encode_corpus(_Encoder(), TEXTS, tmp_path / "cache", "toy", settings=SETTINGS)
    (folder,) = (tmp_path / "cache").iterdir()
    damage(folder)
    again = _Encoder()
    with caplog.at_level(logging.WARNING, logger="clipmag"):
        rebuilt = encode_corpus(again, TEXTS, tmp_path / "cache", "toy", settings=SETTINGS)
    assert again.calls == 5  # every chunk encoded anew
    assert (
        f"corpus cache {folder / 'embeddings.npy'} is damaged" in caplog.text
        and "encoding the corpus again" in caplog.text
    )
    np.testing.assert_array_equal(rebuilt, fresh)
    queries = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    head = build_head("dot")
    for a, b in zip(ExactIndex(rebuilt, head).search(queries, 5), ExactIndex(fresh, head).search(queries, 5)):
        np.testing.assert_array_equal(a, b)
    later = _Encoder()
    np.testing.assert_array_equal(encode_corpus(later, TEXTS, tmp_path / "cache", "toy", settings=SETTINGS), fresh)
    assert later.calls == 0  # healed: the next run reads the cache


def test_a_damaged_cache_that_cannot_be_removed_says_what_to_delete(tmp_path, monkeypatch):
    encode_corpus(_Encoder(), TEXTS, tmp_path / "cache", "toy", settings=SETTINGS)
    (folder,) = (tmp_path / "cache").iterdir()
    _truncate(folder)

    def refuse(self, missing_ok=False):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(corpus_cache.Path, "unlink", refuse)
    with pytest.raises(DamagedCacheError, match=f"is damaged .*; delete the folder {re.escape(str(folder))} and run"):
        encode_corpus(_Encoder(), TEXTS, tmp_path / "cache", "toy", settings=SETTINGS)


# ---- an incomplete BRIGHT root ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def bright_root(tmp_path_factory):
    return download_all_settings(write_hub_tree(tmp_path_factory.mktemp("hub")), tmp_path_factory.mktemp("bright"))


def _copy(root: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(root, tmp_path / "bright"))


def test_a_task_missing_a_file_is_an_error_naming_task_file_and_fetch(bright_root, tmp_path):
    root = _copy(bright_root, tmp_path)
    (root / "pony" / "documents.jsonl").unlink()
    (root / "leetcode" / "examples.jsonl").unlink()
    with pytest.raises(FileNotFoundError) as err:
        load_eval_datasets(root)
    message = str(err.value)
    assert "leetcode lacks examples.jsonl; pony lacks documents.jsonl" in message
    assert f"python -m text_retrieval.data.download bright {root} --tasks leetcode pony" in message
    assert "other 1 task(s)" in message


def test_long_and_reasoning_settings_need_their_own_files(bright_root, tmp_path):
    root = _copy(bright_root, tmp_path)
    (root / "pony" / "long_documents.jsonl").unlink()  # pony has long documents in BRIGHT
    with pytest.raises(FileNotFoundError, match=r"pony lacks long_documents.jsonl.*--tasks pony --long-documents"):
        load_eval_datasets(root, settings=EvalSettings(long_documents=True))
    (root / "biology" / "gpt4_reason.jsonl").unlink()
    with pytest.raises(FileNotFoundError, match=r"biology lacks gpt4_reason.jsonl.*--reasoning gpt4_reason"):
        load_eval_datasets(root, settings=EvalSettings(reasoning="gpt4_reason"))
    (root / "sustainable_living").mkdir()  # named like a BRIGHT task, holding nothing
    with pytest.raises(FileNotFoundError, match="sustainable_living lacks examples.jsonl, documents.jsonl"):
        load_eval_datasets(root)


def test_a_subset_of_whole_tasks_is_evaluated_and_its_mean_states_the_count(bright_root, tmp_path):
    root = _copy(bright_root, tmp_path)
    shutil.rmtree(root / "leetcode")  # a task not downloaded at all: the subset chosen at download
    (root / "notes").mkdir()  # not a task folder
    datasets = load_eval_datasets(root)
    assert [d.task for d in datasets] == ["biology", "pony"]
    records = [
        {
            "model_label": "m",
            "config": {"head": {"name": "dot"}, "bright": d.describe(), "data_source": d.source},
            "metrics": {"NDCG@10": 0.5, "Recall@1": 0.2, "Recall@100": 0.9},
        }
        for d in datasets
    ]
    assert "bright: mean over 2 tasks" in bright_summary(records)


# ---- the image-text splits, by resolved shard file ------------------------------------------------


@pytest.fixture(scope="module")
def digits(tmp_path_factory) -> Path:
    return write_digit_shards(tmp_path_factory.mktemp("digits"), 16, 4, 4, per_class=1, shard_size=8)


def _clip_task(*overrides: str) -> ClipTask:
    cfg = parse_args(["model.name=clipmag-micro", "data.batch_size=4", *overrides])
    return ClipTask(cfg, DistributedContext(0, 1, 0, torch.device("cpu"), None))


def test_validation_on_the_test_shards_spelled_otherwise_is_refused(digits, tmp_path):
    train, val, test = (str(digits / split) for split in ("train", "val", "test"))
    other = f"{digits}/../{digits.name}/test"
    with pytest.raises(ConfigError, match=rf"data.validation and data.test share {test} \(given as .*/\.\./"):
        parse_args([f"data.train={train}", f"data.validation={other}", f"data.test={test}"])
    (tmp_path / "linked").symlink_to(train)
    with pytest.raises(ConfigError, match=rf"data.train and data.test share {train} \(given as .*linked"):
        parse_args([f"data.train={train}", f"data.test={tmp_path / 'linked'}"])
    one_file = f"{digits}/../{digits.name}/train/shard-000001.tar"  # another folder spec, a shared shard file
    with pytest.raises(ConfigError, match=r"data.train and data.test share .*train/shard-000001.tar"):
        _clip_task(f"data.train={train}", f"data.validation={val}", f"data.test={one_file}")
    task = _clip_task(f"data.train={train}", f"data.validation={val}", f"data.test={test}")
    assert task.eval_specs == {"val": [val], "test": [test]}


def test_several_test_sets_are_scored_apart_and_two_of_one_name_are_refused(digits, tmp_path):
    """``data.test`` is a list in both trainers: each set under its folder's name, and a second set
    whose folder has the same name would overwrite the first's numbers, so it is refused."""
    train, val, test = (str(digits / split) for split in ("train", "val", "test"))
    other = shutil.copytree(test, tmp_path / "held-out" / "test")
    task = _clip_task(f"data.train={train}", f"data.validation={val}", "--test", test, str(other))
    assert [s.name for s in task.eval_sets["test"]] == [digits.name, "held-out"]
    assert task.eval_specs["test"] == [test, str(other)]
    twin = shutil.copytree(test, tmp_path / digits.name / "test")
    with pytest.raises(ConfigError, match=rf"data.test: {test} and {twin} are both named '{digits.name}'"):
        _clip_task(f"data.train={train}", f"data.test=[{test}, {twin}]")


def test_validation_on_a_byte_copy_of_the_test_shards_is_refused(digits, tmp_path):
    train, test = (str(digits / split) for split in ("train", "test"))
    copy = shutil.copytree(test, tmp_path / "val-copy")
    with pytest.raises(ConfigError, match=r"data.validation and data.test hold the same shard: .*val-copy/"):
        _clip_task(f"data.train={train}", f"data.validation={copy}", f"data.test={test}")


# ---- a broken image in a shard ---------------------------------------------------------------------


def _rewrite_first_image(shard: Path, data: bytes) -> str:
    with tarfile.open(shard) as tar:
        members = [(m, tar.extractfile(m).read()) for m in tar.getmembers()]
    image = next(m.name for m, _ in members if m.name.endswith(".png"))
    with tarfile.open(shard, "w") as tar:
        for member, content in members:
            content = data if member.name == image else content
            member.size = len(content)
            tar.addfile(member, io.BytesIO(content))
    return image


@pytest.mark.parametrize("workers", [0, 2])
def test_a_truncated_image_names_shard_member_and_fault(digits, tmp_path, workers):
    folder = Path(shutil.copytree(digits / "train", tmp_path / "train"))
    shard = folder / "shard-000000.tar"
    with tarfile.open(shard) as tar:
        png = tar.extractfile(next(m for m in tar.getmembers() if m.name.endswith(".png"))).read()
    image = _rewrite_first_image(shard, png[: len(png) // 2])
    _, _, preprocess, tokenizer = build_open_clip(ClipModelConfig(name="clipmag-micro"))
    stream = ClipShardStream(str(folder), preprocess, tokenizer, 16, seed=0, workers=workers)
    with pytest.raises(ShardError) as err:
        next(stream.batches(0))  # 16 images: both shards, so the broken one whatever the order
    message = str(err.value)
    assert "\n" not in message and "Traceback" not in message
    key = image.removesuffix(".png")
    assert f"shard {shard}: sample {key!r}: its image {image} ({len(png) // 2} bytes) does not decode" in message


def test_an_image_in_no_known_format_says_so(digits, tmp_path):
    folder = Path(shutil.copytree(digits / "test", tmp_path / "test"))
    image = _rewrite_first_image(folder / "shard-000000.tar", b"<html>not found</html>")
    _, _, preprocess, tokenizer = build_open_clip(ClipModelConfig(name="clipmag-micro"))
    with pytest.raises(ShardError, match=f"its image {image} \\(22 bytes\\) is not in an image format PIL reads"):
        read_eval_set(str(folder), preprocess, tokenizer, "data.test")


# ---- training data that is not shards ---------------------------------------------------------------


def test_a_pairs_jsonl_as_shards_names_the_command_that_builds_them(tmp_path):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"query": f"q{i}", "positive": f"p{i}"}) + "\n" for i in range(6)))
    with pytest.raises(ShardError, match="pairs.jsonl is a JSON file, not WebDataset shards") as err:
        TextShardStream(str(pairs), batch_size=2)
    out, source = re.search(r"`clipmag-make-text-shards (\S+) --jsonl (\S+)`", str(err.value)).groups()
    assert "python scripts/make_text_shards.py" in str(err.value) and f"data.train={out}" in str(err.value)
    assert make_shards_main([out, "--jsonl", source]) == 0  # the command given works as written
    assert TextShardStream(out, batch_size=2).num_samples == 6


def test_a_folder_without_shards_suggests_its_source(tmp_path):
    write_code_search_set(tmp_path)
    beir = tmp_path / "beir"
    with pytest.raises(
        FileNotFoundError, match=f"no WebDataset shards .*clipmag-make-text-shards {beir}-shards --beir"
    ):
        TextShardStream(str(beir), batch_size=2)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="clipmag-make-text-shards .*--jsonl PAIRS.jsonl"):
        TextShardStream(str(empty), batch_size=2)


def test_a_tar_of_other_files_is_not_a_text_shard(tmp_path):
    write_tar_shards([{"__key__": "readme", "txt": "hello"}, {"__key__": "photo", "jpg": b"\xff\xd8"}], tmp_path, 5)
    with pytest.raises(ShardError, match=r"shard-000000.tar is not a text shard: .*readme.txt.*clipmag-make-text"):
        TextShardStream(str(tmp_path), batch_size=1)
    notar = tmp_path / "pairs.tar"
    notar.write_text("query\tpositive\n")
    with pytest.raises(ShardError, match=r"pairs.tar: not a readable tar file .*; if it is not a shard, build shards"):
        TextShardStream(str(notar), batch_size=1)


# ---- empty texts at evaluation ---------------------------------------------------------------------


def test_empty_documents_and_queries_are_counted_and_warned_once(caplog):
    docs = {"d0": "Binary search halves a sorted array.", "d1": "", "d2": "   ", "d3": "Hash maps find pairs."}
    dataset = RetrievalDataset(
        name="with-empties",
        corpus_ids=list(docs),
        corpus_texts=list(docs.values()),
        queries={"q0": "find a value in a sorted array", "q1": " \n"},
        qrels={"q0": {"d0": 1}, "q1": {"d3": 1}},
    )
    encoder = minilm_encoder()
    with caplog.at_level(logging.WARNING, logger="clipmag"):
        first = evaluate_retrieval(encoder, dataset, top_k=4, show_progress=False)
        second = evaluate_retrieval(encoder, dataset, top_k=4, show_progress=False)
    warnings = [r.getMessage() for r in caplog.records if "empty or whitespace" in r.getMessage()]
    assert warnings == [
        "with-empties: 2 documents (e.g. 'd1', 'd2') and 1 queries (e.g. 'q1') are empty or whitespace; "
        "they are encoded as they are, so the scores stay comparable"
    ]
    assert first["encoding"]["empty_documents"] == 2 and first["encoding"]["empty_queries"] == 1
    assert first["num_documents"] == 4 and first["num_queries"] == 2  # still encoded and scored
    assert first["NDCG@10"] == second["NDCG@10"]


@pytest.mark.parametrize("workers", [0, 2])
def test_skip_broken_images_replaces_the_sample_counts_it_and_keeps_batches_addressable(digits, tmp_path, workers):
    folder = Path(shutil.copytree(digits / "train", tmp_path / "train"))
    _rewrite_first_image(folder / "shard-000000.tar", b"<html>not found</html>")
    _, _, preprocess, tokenizer = build_open_clip(ClipModelConfig(name="clipmag-micro"))

    def stream() -> ClipShardStream:
        return ClipShardStream(str(folder), preprocess, tokenizer, 16, seed=0, skip_broken=True, workers=workers)

    skipping = stream()
    images, tokens = next(skipping.batches(0))  # 16 images: both shards, the broken one replaced
    assert images.shape[0] == tokens.shape[0] == 16
    # one batch is one pass over both shards; DataLoader workers prefetch later passes too
    assert skipping.skipped == 1 if workers == 0 else skipping.skipped >= 1
    again = [b[0] for _, b in zip(range(3), stream().batches(0))]
    resumed = next(stream().batches(2))[0]
    assert torch.equal(again[0], images) and torch.equal(again[2], resumed)  # the same batches, resumed too
    with pytest.raises(ShardError, match="data.skip_corrupt=true trains on without it"):
        next(ClipShardStream(str(folder), preprocess, tokenizer, 16, seed=0, workers=workers).batches(0))
