"""The head record: one versioned shape, older shapes still load, bad files fail by name."""

from __future__ import annotations

import json

import pytest
import torch

from clipmag.scoring.head_record import FORMAT_VERSION, HEAD_FILE, HeadRecord, HeadRecordError
from clipmag.scoring.heads import build_head


def test_round_trip_keeps_learned_gammas(tmp_path):
    head = build_head("learnable", gq=0.3, gd=0.8)
    record = HeadRecord(head.to_dict(), query_side="image", loss_direction="q2d", scale=14.3, model_name="m")
    record.write(tmp_path)
    back = HeadRecord.read(tmp_path)
    assert back == record and back.format_version == FORMAT_VERSION
    rebuilt = build_head(back)
    q, d = torch.randn(3, 5), torch.randn(4, 5)
    assert torch.allclose(rebuilt.score(q, d), head.score(q, d), atol=1e-6)


def test_format_1_text_export_loads(tmp_path):
    old = {
        "format_version": 1,
        "head": {"name": "qnorm"},
        "pooling": "cls",
        "query_prefix": "q: ",
        "document_prefix": "",
        "query_max_length": 32,
        "document_max_length": 64,
    }
    (tmp_path / HEAD_FILE).write_text(json.dumps(old))
    record = HeadRecord.read(tmp_path)
    assert (record.head_name, record.pooling, record.query_max_length, record.query_side) == ("qnorm", "cls", 32, None)


def test_format_1_clip_export_and_bare_head_load():
    old_clip = {
        "head": {"name": "dnorm"},
        "query_side": "text",
        "loss_direction": "q2d",
        "scale": 20.0,
        "model_name": "clipmag-tiny",
        "objective": "t2i",
    }
    record = HeadRecord.from_dict(old_clip)
    assert (record.head_name, record.query_side, record.scale) == ("dnorm", "text", 20.0)
    assert HeadRecord.from_dict({"name": "learnable", "gq": 0.2, "gd": 0.4}).head["gq"] == 0.2


@pytest.mark.parametrize(
    "values, message",
    [
        ({"format_version": 99, "head": {"name": "dot"}}, "format_version 99 is newer"),
        ({"head": {"name": "l2"}}, "unknown similarity head 'l2'"),
        ({"head": "cosine"}, "key 'head' must be an object"),
    ],
)
def test_bad_records_name_the_problem(tmp_path, values, message):
    (tmp_path / HEAD_FILE).write_text(json.dumps(values))
    with pytest.raises(HeadRecordError, match=message) as err:
        HeadRecord.read(tmp_path)
    assert str(tmp_path / HEAD_FILE) in str(err.value)


def test_invalid_json_names_the_file(tmp_path):
    (tmp_path / HEAD_FILE).write_text("{not json")
    with pytest.raises(HeadRecordError, match="not valid JSON"):
        HeadRecord.read(tmp_path)
