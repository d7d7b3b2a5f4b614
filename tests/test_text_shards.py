"""Text training shards: writing, the rank/worker split, exact resume, and clear failures."""

from __future__ import annotations

import importlib.util
import io
import itertools
import json
import logging
import tarfile
from pathlib import Path

import pytest

from text_retrieval.data.loaders.reading import DataFormatError
from text_retrieval.data.training.pairs import pairs_from_beir, pairs_from_jsonl
from text_retrieval.data.training.shards import CorruptShardError, TextShardStream, load_shard, write_text_shards

_spec = importlib.util.spec_from_file_location(
    "make_text_shards", Path(__file__).parents[1] / "scripts" / "make_text_shards.py"
)
_cli = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_cli)
make_shards_main = _cli.main


def _samples(n: int) -> list[dict]:
    return [{"query": f"q{i}", "positive": f"p{i}", "negatives": [f"n{i}"] * (i % 3)} for i in range(n)]


@pytest.fixture
def shard_dir(tmp_path):
    out = tmp_path / "shards"
    write_text_shards(_samples(80), out, samples_per_shard=10)
    return out


def _take(stream: TextShardStream, start: int, n: int) -> list[dict]:
    return list(itertools.islice(stream.batches(start), n))


def test_round_trip_and_sizes(tmp_path, shard_dir):
    paths = sorted(shard_dir.glob("shard-*.tar"))
    assert len(paths) == 8
    assert json.loads((shard_dir / "sizes.json").read_text()) == {p.name: 10 for p in paths}
    assert [s for p in paths for s in load_shard(str(p))] == _samples(80)
    again = write_text_shards(_samples(80), tmp_path / "again", samples_per_shard=10)
    assert [p.read_bytes() for p in again] == [p.read_bytes() for p in paths]
    with pytest.raises(FileExistsError):
        write_text_shards(_samples(5), shard_dir, 10)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_ranks_cover_one_epoch_without_overlap(shard_dir, num_workers):
    seen = []
    for rank in range(2):
        stream = TextShardStream(shard_dir, batch_size=4, seed=3, rank=rank, world_size=2, num_workers=num_workers)
        batches = _take(stream, 0, 10)  # 2 ranks x 10 steps x 4 = 80 samples = one epoch
        assert all(len(b["query"]) == len(b["positive"]) == len(b["negatives"]) == 4 for b in batches)
        seen += [q for b in batches for q in b["query"]]
    assert sorted(seen) == sorted(f"q{i}" for i in range(80))
    assert stream.samples_seen(10) == 80


@pytest.mark.parametrize("num_workers", [0, 2])
def test_ranks_read_slices_of_the_one_process_batches(shard_dir, num_workers):
    """Global batches of 12 straddle the shards of 10 and the epochs of 80: N ranks of batch 12/N
    are, slice by slice, one process of batch 12, from the first step and from a resumed one."""
    one = _take(TextShardStream(shard_dir, 12, seed=5, num_workers=num_workers), 0, 20)
    for world in (2, 3):
        ranks = [
            TextShardStream(shard_dir, 12 // world, seed=5, rank=r, world_size=world, num_workers=num_workers)
            for r in range(world)
        ]
        for start in (0, 7):
            parts = [_take(rank, start, 20 - start) for rank in ranks]
            joined = [{k: sum((part[k] for part in step), []) for k in step[0]} for step in zip(*parts)]
            assert joined == one[start:]


def test_a_rank_reads_only_the_shards_its_slices_lie_in(shard_dir):
    """Shards of 10 and slices of 10: each shard is one rank's, and the other rank never opens it."""

    class Counting(TextShardStream):
        def read_shard(self, index: int) -> list[dict]:
            self.read.append(index)
            return super().read_shard(index)

    read = []
    for rank in (0, 1):
        stream = Counting(shard_dir, 10, seed=2, rank=rank, world_size=2)
        stream.read = []
        _take(stream, 0, 4)  # one epoch: 80 samples
        read.append(stream.read)
    assert len(read[0]) == len(read[1]) == 4 and sorted(read[0] + read[1]) == list(range(8))


@pytest.mark.parametrize("num_workers", [0, 2])
def test_resume_equals_uninterrupted(shard_dir, num_workers):
    stream = TextShardStream(shard_dir, batch_size=6, seed=1, rank=1, world_size=2, num_workers=num_workers)
    full = _take(stream, 0, 40)  # several epochs, batches straddling shard and epoch ends
    for start in (1, 7, 13):
        assert _take(stream, start, 40 - start) == full[start:]


def test_different_seeds_differ(shard_dir):
    a = _take(TextShardStream(shard_dir, 8, seed=0), 0, 3)
    b = _take(TextShardStream(shard_dir, 8, seed=1), 0, 3)
    assert a != b


def _break(path) -> None:
    path.write_bytes(path.read_bytes()[:700] + b"\x00garbage" * 50)


def test_corrupt_shard_is_an_error_naming_it(shard_dir):
    bad = shard_dir / "shard-000003.tar"
    _break(bad)
    stream = TextShardStream(shard_dir, batch_size=4)
    with pytest.raises(CorruptShardError, match="shard-000003.tar"):
        _take(stream, 0, 20)  # one full epoch touches every shard


def test_corrupt_shard_skipped_when_allowed(shard_dir, caplog):
    bad = shard_dir / "shard-000005.tar"
    _break(bad)
    with caplog.at_level(logging.WARNING, logger="clipmag"):
        stream = TextShardStream(shard_dir, batch_size=4, allow_corrupt=True)
    assert stream.skipped_shards == [str(bad)]
    assert stream.num_samples == 70
    assert "skipped 1 of 8 shards" in caplog.text
    queries = {q for b in _take(stream, 0, 35) for q in b["query"]}
    assert queries == {f"q{i}" for i in range(80) if not 50 <= i < 60}


def test_bad_json_inside_a_shard(tmp_path):
    out = tmp_path / "s"
    out.mkdir()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        data = b'{"query": "q", "positive":'
        info = tarfile.TarInfo("000000001.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    (out / "shard-000000.tar").write_bytes(buf.getvalue())
    with pytest.raises(CorruptShardError, match="shard-000000.tar"):
        _take(TextShardStream(out, batch_size=1), 0, 1)


def test_empty_directory_error_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match=str(tmp_path)):
        TextShardStream(tmp_path, batch_size=2)


def test_bad_jsonl_line_names_file_and_line(tmp_path, capsys):
    bad = tmp_path / "pairs.jsonl"
    bad.write_text('{"query": "a", "positive": "b"}\n{"query": "c"\n')
    with pytest.raises(DataFormatError, match=r"pairs.jsonl, line 2"):
        pairs_from_jsonl(bad)
    assert make_shards_main([str(tmp_path / "out"), "--jsonl", str(bad)]) == 2
    assert "pairs.jsonl, line 2" in capsys.readouterr().err
    missing = tmp_path / "missing.jsonl"
    missing.write_text('{"query": "a"}\n')
    with pytest.raises(DataFormatError, match="line 1"):
        pairs_from_jsonl(missing)


def test_jsonl_formats_and_cli(tmp_path):
    src = tmp_path / "mixed.jsonl"
    rows = [
        {"query": "a", "positive": "b", "negatives": ["x", "y"]},
        {"query_id": "7", "query": "c", "doc_id": "9", "title": "T", "text": "body"},
    ]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert pairs_from_jsonl(src) == [
        {"query": "a", "positive": "b", "negatives": ["x", "y"]},
        {"query": "c", "positive": "T body", "negatives": []},
    ]
    out = tmp_path / "out"
    assert make_shards_main([str(out), "--jsonl", str(src), "--samples-per-shard", "1"]) == 0
    assert len(list(out.glob("shard-*.tar"))) == 2


def test_pairs_from_beir_train_qrels(tmp_path):
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": d, "title": "", "text": f"doc {d}"}) + "\n" for d in ("d1", "d2", "d3"))
    )
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": f"query {q}"}) + "\n" for q in ("q1", "q2"))
    )
    (folder / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td3\t1\nq2\td2\t0\n")
    assert pairs_from_beir(folder, "train") == [
        {"query": "query q1", "positive": "doc d1", "negatives": []},
        {"query": "query q1", "positive": "doc d3", "negatives": []},
    ]
