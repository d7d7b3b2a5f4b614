"""The training-set builders on tiny files in the published layouts, through ``--source`` (no network).

MS MARCO v1.1 as the hub's parquet (the real arrow schema), BEIR's msmarco folder, SNLI/MultiNLI
zips with their jsonl members and the STS Benchmark tarball: counts, the selection rule, dedup,
seeds, and that the outputs load with the project's own readers.
"""

from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import REPO, script_env

from clipmag.storage.folder_lock import LOCK_FILE
from clipmag_experiments.dry_run.standin_training_sets import msmarco_schema
from text_retrieval.data import download
from text_retrieval.data.loaders.beir import load_beir
from text_retrieval.data.loaders.reading import DataFormatError
from text_retrieval.data.loaders.sts import GoldScale, load_sts_file
from text_retrieval.data.shards_cli import main as make_shards_main
from text_retrieval.data.training.allnli import NLI_SCORES
from text_retrieval.data.training.msmarco import MSMARCO_REVISION
from text_retrieval.data.training.shards import TextShardStream, load_shard


def _row(qid: int, query: str, passages: list[tuple[str, int]]) -> dict:
    return {
        "answers": ["an answer"],
        "passages": {
            "is_selected": [flag for _, flag in passages],
            "passage_text": [text for text, _ in passages],
            "url": [f"http://example.com/{qid}/{i}" for i in range(len(passages))],
        },
        "query": query,
        "query_id": qid,
        "query_type": "DESCRIPTION",
        "wellFormedAnswers": [],
    }


TRAIN_ROWS = [
    _row(1, "what is a cat", [("cats are pets", 0), ("a cat is a small feline", 1), ("felines purr", 1)]),
    _row(2, "no answer here", [("unrelated text", 0), ("more unrelated", 0)]),
    _row(3, "what is a cat", [("other", 0), ("a cat is a small feline", 1)]),  # repeats row 1's pair
    _row(4, "   ", [("a passage", 1)]),
    _row(5, "empty first pick", [("", 1), ("the real positive", 1), ("the real positive", 0), ("neg", 0)]),
    _row(6, "what is a cat", [("cats meow", 1)]),  # same query, another positive: kept
    *[_row(100 + i, f"generic query {i}", [(f"pos {i}", 1), (f"neg {i} a", 0), (f"neg {i} b", 0)]) for i in range(20)],
]
VALIDATION_ROWS = [
    _row(
        5000 + i,
        f"validation query {i}",
        [(f"val pos {i}", 1)]
        + ([(f"val pos2 {i}", 1)] if i % 3 == 0 else [])
        + [(f"val other {i} {j}", 0) for j in range(3)],
    )
    for i in range(30)
]


def _write_parquet(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=msmarco_schema()), path)


@pytest.fixture(scope="module")
def msmarco_source(tmp_path_factory) -> Path:
    """The hub's layout of microsoft/ms_marco v1.1: ``v1.1/<split>-00000-of-00001.parquet``."""
    root = tmp_path_factory.mktemp("ms_marco")
    _write_parquet(root / "v1.1" / "train-00000-of-00001.parquet", TRAIN_ROWS)
    _write_parquet(root / "v1.1" / "validation-00000-of-00001.parquet", VALIDATION_ROWS)
    return root


def _build_80k(source: Path, out: Path, seed: int = 0, *extra: str) -> dict:
    args = ["msmarco", str(out), "--source", str(source), "--seed", str(seed), "--dev-queries", "5"]
    download.main([*args, "--dev-corpus", "40", "--samples-per-shard", "7", *extra])
    return json.loads((out / "manifest.json").read_text())


def _files(folder: Path) -> dict[str, bytes]:
    """A folder's content: every file but the empty lock a shard build leaves (clipmag.storage.folder_lock)."""
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != LOCK_FILE
    }


def test_msmarco80k_selection_rule_and_counts(msmarco_source, tmp_path):
    manifest = _build_80k(msmarco_source, tmp_path / "m")
    counts = manifest["counts"]
    assert counts == {"rows": 26, "pairs": 23, "no_selected_passage": 1, "duplicate_pair": 1, "empty_query": 1}
    assert manifest["pairs"] == 23 and manifest["revision"] == MSMARCO_REVISION
    pairs = [json.loads(line) for line in (tmp_path / "m" / "pairs.jsonl").read_text().splitlines()]
    by_id = {p["query_id"]: p for p in pairs}
    assert set(by_id) == {"1", "5", "6", *(str(100 + i) for i in range(20))}
    # the first selected passage, not the first passage; the other selected one is no negative
    assert by_id["1"] == {
        "query_id": "1",
        "query": "what is a cat",
        "positive": "a cat is a small feline",
        "negatives": ["cats are pets"],
    }
    assert by_id["5"]["positive"] == "the real positive" and by_id["5"]["negatives"] == ["neg"]
    assert by_id["6"]["positive"] == "cats meow"  # same query text, another positive: not a duplicate


def test_msmarco80k_shards_load_and_equal_the_documented_rebuild(msmarco_source, tmp_path):
    manifest = _build_80k(msmarco_source, tmp_path / "m")
    shards = tmp_path / "m" / "shards"
    assert manifest["shards"] == {"folder": "shards", "count": 4, "samples_per_shard": 7, "seed": 0}
    stream = TextShardStream(shards, batch_size=2)
    assert stream.num_samples == 23
    pairs = [json.loads(line) for line in (tmp_path / "m" / "pairs.jsonl").read_text().splitlines()]
    stored = [s for p in sorted(shards.glob("*.tar")) for s in load_shard(str(p))]
    strip = [{k: p[k] for k in ("query", "positive", "negatives")} for p in pairs]
    assert sorted(map(json.dumps, stored)) == sorted(map(json.dumps, strip)) and stored != strip  # shuffled
    rebuilt = tmp_path / "rebuilt"
    assert (
        make_shards_main([str(rebuilt), "--jsonl", str(tmp_path / "m" / "pairs.jsonl"), "--samples-per-shard", "7"])
        == 0
    )
    assert _files(rebuilt) == _files(shards)


def test_msmarco80k_dev_subset_is_a_beir_folder(msmarco_source, tmp_path):
    _build_80k(msmarco_source, tmp_path / "m")
    dev = load_beir(tmp_path / "m" / "dev", split="dev")
    info = json.loads((tmp_path / "m" / "dev" / "manifest.json").read_text())
    assert len(dev.queries) == info["queries"] == 5 and len(dev.corpus_ids) == info["corpus"] == 40
    assert info["seed"] == 0 and info["judged_passages"] + info["distractors"] == 40
    texts = dict(zip(dev.corpus_ids, dev.corpus_texts))
    for qid, judged in dev.qrels.items():
        i = int(qid) - 5000
        assert dev.queries[qid] == f"validation query {i}"
        assert sorted(texts[d] for d in judged) == sorted([f"val pos {i}"] + ([f"val pos2 {i}"] if i % 3 == 0 else []))
        assert set(judged.values()) == {1}
        # the sampled query's own unselected passages are left out of the corpus
        assert not any(t.startswith(f"val other {i} ") for t in texts.values())
    assert info["judged_passages"] == sum(map(len, dev.qrels.values()))


def test_msmarco80k_same_seed_same_files_other_seed_other_sample(msmarco_source, tmp_path):
    _build_80k(msmarco_source, tmp_path / "a", 3)
    _build_80k(msmarco_source, tmp_path / "b", 3)
    assert _files(tmp_path / "a") == _files(tmp_path / "b")
    _build_80k(msmarco_source, tmp_path / "c", 4)
    assert _files(tmp_path / "a" / "dev")["queries.jsonl"] != _files(tmp_path / "c" / "dev")["queries.jsonl"]
    assert _files(tmp_path / "a" / "shards") != _files(tmp_path / "c" / "shards")
    with pytest.raises(FileExistsError, match="--overwrite"):
        _build_80k(msmarco_source, tmp_path / "a", 3)
    _build_80k(msmarco_source, tmp_path / "a", 3, "--overwrite")


def test_msmarco80k_schema_and_size_errors_name_the_file(tmp_path, msmarco_source):
    bad = tmp_path / "bad" / "v1.1"
    bad.mkdir(parents=True)
    pq.write_table(pa.table({"query": ["q"], "query_id": [1]}), bad / "train-00000-of-00001.parquet")
    pq.write_table(pa.table({"query": ["q"], "query_id": [1]}), bad / "validation-00000-of-00001.parquet")
    with pytest.raises(DataFormatError, match=r"train-00000-of-00001\.parquet.*passages"):
        _build_80k(bad.parent, tmp_path / "out")
    with pytest.raises(FileNotFoundError, match=r"no train-\*\.parquet"):
        _build_80k(msmarco_source / "v1.1" / "nowhere", tmp_path / "out")
    with pytest.raises(ValueError, match="asked for 500, but the source holds only 30"):
        download.main(["msmarco", str(tmp_path / "o"), "--source", str(msmarco_source)])
    assert not (tmp_path / "o").exists()  # checked before anything is written


def test_msmarco80k_junk_parquet_names_its_file(tmp_path):
    junk = tmp_path / "junk" / "v1.1"
    junk.mkdir(parents=True)
    for split in ("train", "validation"):
        (junk / f"{split}-00000-of-00001.parquet").write_bytes(b"not a parquet file at all")
    with pytest.raises(DataFormatError, match=r"train-00000-of-00001\.parquet: expected a parquet file .* unreadable"):
        _build_80k(junk.parent, tmp_path / "out")


def _write_beir_msmarco(root: Path) -> Path:
    (root / "qrels").mkdir(parents=True)
    corpus = [{"_id": str(i), "title": "", "text": f"passage {i}"} for i in range(60)]
    corpus[59] = {"_id": "59", "title": "Title", "text": "with a title"}
    queries = [{"_id": f"q{i}", "text": f"query {i}"} for i in range(20)] + [{"_id": "q19b", "text": "query 19"}]
    (root / "corpus.jsonl").write_text("".join(json.dumps(c) + "\n" for c in corpus))
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    train = [("q0", "5", 1), ("q0", "3", 1), ("q1", "7", 0), ("q2", "59", 1)]
    train += [(f"q{i}", str(i + 10), 1) for i in range(3, 10)] + [("q19", "40", 1), ("q19b", "40", 1)]
    dev = [(f"q{i}", str(i + 20), 1) for i in range(10, 19)] + [("q10", "45", 1)]
    for name, rows in (("train", train), ("dev", dev)):
        lines = "".join(f"{q}\t{d}\t{s}\n" for q, d, s in rows)
        (root / "qrels" / f"{name}.tsv").write_text("query-id\tcorpus-id\tscore\n" + lines)
    return root


def test_msmarco500k_from_the_beir_folder(tmp_path):
    source = _write_beir_msmarco(tmp_path / "msmarco")
    args = ["msmarco", "OUT", "--size", "500k", "--source", str(source), "--dev-queries", "3", "--dev-corpus", "20"]
    download.main([a.replace("OUT", str(tmp_path / "a")) for a in args])
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert manifest["counts"] == {"queries": 11, "pairs": 10, "duplicate_pair": 1}  # q1 has no relevant judgment
    pairs = {p["query_id"]: p for p in map(json.loads, (tmp_path / "a" / "pairs.jsonl").read_text().splitlines())}
    assert pairs["q0"]["positive"] == "passage 5"  # the first judged passage in file order
    assert pairs["q2"]["positive"] == "Title with a title" and "q19b" not in pairs
    assert all(p["negatives"] == [] for p in pairs.values())
    dev = load_beir(tmp_path / "a" / "dev", split="dev")
    assert len(dev.queries) == 3 and len(dev.corpus_ids) == 20 and set(dev.queries) <= {f"q{i}" for i in range(10, 19)}
    assert all(d in dev.corpus_ids for judged in dev.qrels.values() for d in judged)
    assert TextShardStream(tmp_path / "a" / "shards", batch_size=3).num_samples == 10
    download.main([a.replace("OUT", str(tmp_path / "b")) for a in args])
    files_a, files_b = _files(tmp_path / "a"), _files(tmp_path / "b")
    assert files_a == files_b


def _zip(path: Path, members: dict[str, str]) -> None:
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in members.items():
            zf.writestr(name, text)


def _nli_line(label: str, s1: str, s2: str, **extra: str) -> str:
    record = {"annotator_labels": [label], "gold_label": label, "pairID": "1", "sentence1": s1, "sentence2": s2}
    return json.dumps({**record, "sentence1_parse": "(ROOT)", "sentence2_parse": "(ROOT)", **extra}) + "\n"


SNLI = (
    _nli_line("neutral", "A person on a horse.", "A person is training a horse.", captionID="3416050480.jpg#4")
    + _nli_line("contradiction", "A person on a horse.", "A person is at a diner.")
    + _nli_line("entailment", "A person on a horse.", "A person is outdoors,\ton a horse.")
    + _nli_line("-", "Two men.", "No consensus here.")
)
MNLI = _nli_line("neutral", "Conceptually cream skimming.", "Product and geography.", genre="government") + _nli_line(
    "entailment", "you know during the season", "You lose the things.", genre="telephone"
)
STSB = (
    "main-captions\tMSRvid\t2012test\t0001\t5.000\tA plane is taking off.\tAn air plane is taking off.\n"
    "main-captions\tMSRvid\t2012test\t0004\t3.800\tA man is playing a flute.\tA man is playing a bamboo flute.\n"
    "main-news\theadlines\t2013\t0010\t0.000\tThe cat sat.\tStocks fell sharply.\tsrc-a\tsrc-b\n"
)


@pytest.fixture(scope="module")
def nli_source(tmp_path_factory) -> Path:
    """The three archives as published: members under their release folders, SNLI's __MACOSX junk."""
    root = tmp_path_factory.mktemp("nli")
    _zip(root / "snli_1.0.zip", {"snli_1.0/snli_1.0_train.jsonl": SNLI, "__MACOSX/snli_1.0/._snli_1.0_train.jsonl": ""})
    _zip(root / "multinli_1.0.zip", {"multinli_1.0/multinli_1.0_train.jsonl": MNLI})
    with tarfile.open(root / "Stsbenchmark.tar.gz", "w:gz") as tf:
        data = STSB.encode()
        info = tarfile.TarInfo("stsbenchmark/sts-train.csv")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    return root


def test_allnli_sts_mapping_counts_and_loader(nli_source, tmp_path):
    download.main(["allnli", str(tmp_path / "sts"), "--source", str(nli_source)])
    out = tmp_path / "sts" / "train.tsv"
    lines = out.read_text().splitlines()
    assert lines[0] == "sentence1\tsentence2\tscore"
    assert lines[3] == "A person on a horse.\tA person is outdoors, on a horse.\t1"  # the tab became a space
    pairs = load_sts_file(out, default_scale=GoldScale(0.0, 1.0, "the sts objective's default"))
    assert len(pairs) == 3 + 2 + 3 and pairs.gold_scale.hi == 1.0
    assert list(pairs.scores) == [0.5, 0.0, 1.0, 0.5, 1.0, 1.0, 0.76, 0.0]
    manifest = json.loads((tmp_path / "sts" / "train.manifest.json").read_text())
    assert manifest["nli_scores"] == NLI_SCORES == {"entailment": 1.0, "neutral": 0.5, "contradiction": 0.0}
    snli = {"read": 4, "neutral": 1, "contradiction": 1, "entailment": 1, "no_gold_label": 1, "written": 3}
    assert manifest["counts"] == {
        "snli": snli,
        "mnli": {"read": 2, "neutral": 1, "entailment": 1, "written": 2},
        "stsb": {"read": 3, "written": 3},
    }
    assert manifest["pairs"] == 8 and manifest["sources"]["snli"]["file"] == "snli_1.0.zip"


def test_allnli_reads_unpacked_files_the_same(nli_source, tmp_path):
    unpacked = tmp_path / "unpacked"
    for archive in ("snli_1.0.zip", "multinli_1.0.zip"):
        with zipfile.ZipFile(nli_source / archive) as zf:
            zf.extractall(unpacked)
    with tarfile.open(nli_source / "Stsbenchmark.tar.gz") as tf:
        tf.extractall(unpacked, filter="data")
    download.main(["allnli", str(tmp_path / "a"), "--source", str(nli_source)])
    download.main(["allnli", str(tmp_path / "b"), "--source", str(unpacked)])
    assert (tmp_path / "a" / "train.tsv").read_bytes() == (tmp_path / "b" / "train.tsv").read_bytes()
    with pytest.raises(FileNotFoundError, match="snli_1.0_train.jsonl nor snli_1.0.zip"):
        download.main(["allnli", str(tmp_path / "c"), "--source", str(tmp_path / "a")])


def test_allnli_unknown_label_names_file_and_line(tmp_path):
    _zip(tmp_path / "snli_1.0.zip", {"snli_1.0/snli_1.0_train.jsonl": SNLI + _nli_line("maybe", "a", "b")})
    _zip(tmp_path / "multinli_1.0.zip", {"multinli_1.0/multinli_1.0_train.jsonl": MNLI})
    (tmp_path / "sts-train.csv").write_text(STSB)
    with pytest.raises(DataFormatError, match=r"snli_1\.0\.zip:snli_1\.0/snli_1\.0_train\.jsonl, line 5.*'maybe'"):
        download.main(["allnli", str(tmp_path / "out"), "--source", str(tmp_path)])


@pytest.mark.parametrize("command", [["msmarco"], ["msmarco", "--size", "500k"], ["allnli"]])
def test_offline_is_one_line_naming_the_url_and_source(command, monkeypatch, tmp_path):
    def refuse(*args, **kwargs):
        raise OSError("network unreachable")

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(socket, "create_connection", refuse)
    with pytest.raises(ConnectionError) as caught:
        download.main([command[0], str(tmp_path / "out"), *command[1:]])
    message = str(caught.value)
    assert "\n" not in message and "cannot be fetched" in message and "--source" in message
    assert "https://" in message and "network unreachable" in message
    assert not list((tmp_path / "out").rglob("*.partial-*"))


def test_offline_cli_prints_one_error_line(tmp_path):
    run = subprocess.run(
        [sys.executable, "-m", "text_retrieval.data.download", "msmarco", str(tmp_path / "m")],
        cwd=REPO,
        env={**script_env(), "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode != 0
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: HF_HUB_OFFLINE=1 is set, so the Hugging Face hub")
    assert "huggingface.co/datasets/microsoft/ms_marco/resolve/" in lines[0] and "--source DIR" in lines[0]
