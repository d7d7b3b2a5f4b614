"""A byte that is not UTF-8 names the file, the line and the byte in every reader of text data, and
a trainer reads its validation and test sets before its first step, so a bad one costs seconds."""

from __future__ import annotations

import io
import json
import re
import shutil
import tarfile
import zipfile
from pathlib import Path

import pytest
from clip_fixtures import write_digit_shards
from text_fixtures import tiny_train_args, write_beir, write_code_search_set, write_tiny_bert

from clipmag.config.build import load_yaml
from clipmag.storage.shards import ShardError
from clipmag.storage.user_files import NotUtf8Error
from image_text.cli import main as train_clip
from image_text.data.sources import read_caption_file, read_karpathy
from text_retrieval.cli import main as train_text
from text_retrieval.data.loaders import load_beir, load_eval_datasets, load_sts_file
from text_retrieval.data.loaders.eval_settings import read_settings_file
from text_retrieval.data.shards_cli import main as make_shards_main
from text_retrieval.data.training.allnli import SOURCES, read_nli
from text_retrieval.data.training.pairs import pairs_from_jsonl
from text_retrieval.rag.data import read_corpus, read_qa


def _spoil(path: Path, line: int, column: int = 3) -> None:
    """Put the Latin-1 byte of "é" (0xe9, never valid alone in UTF-8) at ``column`` of ``line``."""
    lines = path.read_bytes().splitlines(keepends=True)
    lines[line - 1] = lines[line - 1][: column - 1] + b"\xe9" + lines[line - 1][column - 1 :]
    path.write_bytes(b"".join(lines))


def _fault(path: Path | str, line: int, column: int = 3) -> str:
    return rf"{re.escape(str(path))}, line {line}: expected UTF-8 text, found the byte 0xe9 at column {column}; convert"


def _beir(root: Path) -> Path:
    corpus = [{"_id": f"d{i}", "title": "", "text": f"document number {i}"} for i in range(5)]
    queries = [{"_id": f"q{i}", "text": f"query {i}"} for i in range(3)]
    return write_beir(root / "beir", corpus, queries, [(f"q{i}", f"d{i}", 1) for i in range(3)])


@pytest.mark.parametrize("name, line", [("corpus.jsonl", 4), ("queries.jsonl", 2), ("qrels/test.tsv", 3)])
def test_a_beir_file_names_its_line(name, line, tmp_path):
    folder = _beir(tmp_path)
    _spoil(folder / name, line)
    with pytest.raises(NotUtf8Error, match=_fault(folder / name, line)):
        load_beir(folder)


def test_a_gzipped_corpus_names_its_line(tmp_path):
    import gzip

    folder = _beir(tmp_path)
    _spoil(folder / "corpus.jsonl", 5, column=20)
    (folder / "corpus.jsonl.gz").write_bytes(gzip.compress((folder / "corpus.jsonl").read_bytes()))
    (folder / "corpus.jsonl").unlink()
    with pytest.raises(NotUtf8Error, match=_fault(folder / "corpus.jsonl.gz", 5, 20)):
        load_beir(folder)


def test_bright_sts_config_and_settings_files_name_their_line(tmp_path):
    task = tmp_path / "bright" / "biology"
    task.mkdir(parents=True)
    (task / "documents.jsonl").write_text("".join(json.dumps({"id": f"d{i}", "content": "x"}) + "\n" for i in range(3)))
    (task / "examples.jsonl").write_text(json.dumps({"id": "q", "query": "y", "gold_ids": ["d1"]}) + "\n")
    _spoil(task / "documents.jsonl", 2)
    with pytest.raises(NotUtf8Error, match=_fault(task / "documents.jsonl", 2)):
        load_eval_datasets(tmp_path / "bright")
    sts = tmp_path / "pairs.tsv"
    sts.write_text("".join(f"sentence {i}\tother sentence {i}\t{i % 5}\n" for i in range(6)))
    _spoil(sts, 6, column=12)
    with pytest.raises(NotUtf8Error, match=_fault(sts, 6, 12)):
        load_sts_file(sts)
    config = tmp_path / "run.yaml"
    config.write_text("head:\n  name: dot\n")
    _spoil(config, 2, column=9)
    with pytest.raises(NotUtf8Error, match=_fault(config, 2, 9)):
        load_yaml(config)
    settings = tmp_path / "bright.yaml"
    settings.write_text(f"bright: {tmp_path / 'bright'}\nname: caf\n")
    _spoil(settings, 2, column=10)
    with pytest.raises(NotUtf8Error, match=_fault(settings, 2, 10)):
        read_settings_file(settings)


def test_training_pairs_name_their_line_in_the_builder_and_its_command(tmp_path, capsys):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"query": f"q{i}", "positive": f"p{i}"}) + "\n" for i in range(4)))
    _spoil(pairs, 3)
    with pytest.raises(NotUtf8Error, match=_fault(pairs, 3)):
        pairs_from_jsonl(pairs)
    assert make_shards_main([str(tmp_path / "shards"), "--jsonl", str(pairs)]) == 2
    assert re.fullmatch(rf"error: {_fault(pairs, 3)} .*\n", capsys.readouterr().err)
    member = tmp_path / "snli.jsonl"
    member.write_text(
        "".join(json.dumps({"sentence1": "a", "sentence2": "b", "gold_label": "-"}) + "\n" for _ in range(3))
    )
    _spoil(member, 3, column=16)
    with zipfile.ZipFile(tmp_path / "snli_1.0.zip", "w") as archive:
        archive.writestr(SOURCES["snli"].member, member.read_bytes())
    with pytest.raises(NotUtf8Error, match=_fault(f"snli_1.0.zip:{SOURCES['snli'].member}", 3, 16)):
        list(read_nli(tmp_path / "snli_1.0.zip", SOURCES["snli"]))


def test_rag_and_caption_files_name_their_line(tmp_path, tiny_rag_files):
    corpus, questions = tiny_rag_files
    for path, read in ((corpus, read_corpus), (questions, read_qa)):
        _spoil(path, 2)
        with pytest.raises(NotUtf8Error, match=_fault(path, 2)):
            read(path)
    captions = tmp_path / "captions.tsv"
    captions.write_text("a.png\ta red square\nb.png\ta blue circle\n")
    _spoil(captions, 2, column=9)
    with pytest.raises(NotUtf8Error, match=_fault(captions, 2, 9)):
        read_caption_file(captions)
    karpathy = tmp_path / "dataset_coco.json"
    karpathy.write_text('{"images": [\n{"filename": "caf", "sentences": []}]}\n')
    _spoil(karpathy, 2, column=17)
    with pytest.raises(NotUtf8Error, match=_fault(karpathy, 2, 17)):
        read_karpathy(karpathy)


# ---- trainers check their evaluation data before the first step ------------------------------------


def test_the_text_trainer_reads_its_test_set_before_training(tmp_path):
    write_code_search_set(tmp_path)
    test_set = Path(shutil.copytree(tmp_path / "beir", tmp_path / "test"))
    _spoil(test_set / "corpus.jsonl", 7)
    model = write_tiny_bert(tmp_path / "bert")
    out = tmp_path / "run"
    args = tiny_train_args(model, tmp_path, out, f"data.test=[{test_set}]")
    with pytest.raises(NotUtf8Error, match=_fault(test_set / "corpus.jsonl", 7)):
        train_text(args)
    assert not (out / "checkpoints").exists() and not (out / "metrics.jsonl").exists()


def _spoil_first_caption(shard: Path) -> str:
    with tarfile.open(shard) as tar:
        members = [(m, tar.extractfile(m).read()) for m in tar.getmembers()]
    caption = next(m.name for m, _ in members if m.name.endswith(".txt"))
    with tarfile.open(shard, "w") as tar:
        for member, content in members:
            content = b"caf\xe9 " + content if member.name == caption else content
            member.size = len(content)
            tar.addfile(member, io.BytesIO(content))
    return caption


def test_the_clip_trainer_reads_its_test_shards_before_training(tmp_path):
    digits = write_digit_shards(tmp_path / "digits", 16, 4, 4, per_class=1, shard_size=8)
    caption = _spoil_first_caption(digits / "test" / "shard-000000.tar")
    out = tmp_path / "run"
    args = ["model.name=clipmag-micro", "data.batch_size=4", "train.steps=2"]
    args += [f"data.{split}_shards={digits / split}" for split in ("train", "val", "test")]
    args += ["train.device=cpu", "train.progress=false", "train.tensorboard=false", f"train.output_dir={out}"]
    with pytest.raises(ShardError, match=rf"shard-000000.tar: sample .*: its captions {caption} are not UTF-8 text"):
        train_clip(args)
    assert not (out / "checkpoints").exists() and not (out / "metrics.jsonl").exists()
