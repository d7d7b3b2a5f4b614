"""A text loader given something that is not a text model says so in one line: an empty folder, a
CLIP export, a folder without config.json, a folder that is not there, or a hub name this offline
machine has not cached - through TextEncoder, the MTEB adapter and an entry point alike."""

from __future__ import annotations

import pytest
from huggingface_hub import constants

from clipmag.config.entry import run_entry_point
from clipmag.scoring.head_record import HeadRecord
from text_retrieval.evaluation.mteb_model import load_for_mteb
from text_retrieval.model.encoder import TextEncoder
from text_retrieval.model.source import ModelSourceError, check_text_model_source


@pytest.fixture
def clip_export(tmp_path):
    folder = tmp_path / "clip-export"
    folder.mkdir()
    HeadRecord({"name": "qnorm"}, query_side="image", loss_direction="q2d", scale=14.3).write(folder)
    (folder / "open_clip_config.json").write_text("{}")
    return folder


def test_each_kind_of_non_model_is_named(tmp_path, clip_export, monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    (tmp_path / "empty").mkdir()
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "model.safetensors").write_bytes(b"")
    (tmp_path / "notes.txt").write_text("a file")
    cases = {
        str(tmp_path / "empty"): "an empty folder; expected a Hugging Face text model folder",
        str(clip_export): "a clipmag CLIP export \\(image and text towers\\), not a text model",
        str(tmp_path / "weights"): "a folder without config.json",
        str(tmp_path / "notes.txt"): "a file; expected",
        str(tmp_path / "no" / "such" / "folder"): "no such folder",
        "all-MiniLM-L6-v3": "no Hugging Face model of that name is cached on this machine",
    }
    for source, message in cases.items():
        with pytest.raises(ModelSourceError, match=message):
            check_text_model_source(source)


def test_loaders_and_entry_points_stop_with_the_line(tmp_path, clip_export, monkeypatch, capsys):
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(ModelSourceError, match="a clipmag CLIP export"):
        TextEncoder.from_pretrained(clip_export)
    with pytest.raises(ModelSourceError, match="a clipmag CLIP export"):
        load_for_mteb(str(clip_export))
    with pytest.raises(SystemExit) as stop:
        run_entry_point(lambda argv: TextEncoder.from_pretrained(argv[0]), ["sentence-transformers/all-MiniLM-L6-v3"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "model sentence-transformers/all-MiniLM-L6-v3: no such folder" in err
