"""The offline sets were once spelt ``embedded``: the old spelling still resolves to the same data,
with one warning line naming both, and a stored run written with it is the same run as a new one."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from clipmag.clip.config import ClipConfig
from clipmag.config.build import build_config, to_dict
from clipmag.experiments.cells.same_run import run_identity
from clipmag.experiments.design.grid import Cell
from clipmag.experiments.design.protocol import read_protocol, record_start
from clipmag.experiments.sweep import run as sweep
from text_retrieval.config import TextConfig
from text_retrieval.predict.cli import PredictConfig
from text_retrieval.rag.config import RagConfig

REPO = Path(__file__).resolve().parents[1]
# A finished cell of the stored positive-regime sweep, whose argument list says embedded:indomain.
STORED_CELL = REPO / "results" / "positive_regime" / "scale-grid" / "splade" / "dnorm-scale5" / "seed0"


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


@pytest.mark.parametrize(
    ("cls", "old", "new", "read"),
    [
        (
            TextConfig,
            "data.test=[embedded:indomain, embedded:outdomain]",
            "data.test=[bundled:indomain, bundled:outdomain]",
            lambda c: c.data.test,
        ),
        (TextConfig, "data.train=embedded", "data.train=bundled", lambda c: c.data.train),
        (ClipConfig, "data.source=embedded", "data.source=bundled", lambda c: c.data.source),
        (RagConfig, "data.source=embedded", "data.source=bundled", lambda c: c.data.source),
        (PredictConfig, "data=embedded", "data=bundled", lambda c: c.data),
    ],
)
def test_the_old_spelling_resolves_to_the_new_one_with_one_warning(cls, old, new, read, caplog):
    with caplog.at_level(logging.WARNING, logger="clipmag"):
        given_new = build_config(cls, None, [new])
    assert _warnings(caplog) == []
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="clipmag"):
        given_old = build_config(cls, None, [old])
    (line,) = _warnings(caplog)
    assert old.split("=")[0] in line and "embedded" in line and "bundled" in line and "old spelling" in line
    assert to_dict(given_old) == to_dict(given_new) and "embedded" not in str(read(given_old))


def test_a_config_file_with_the_old_spelling_is_read_in_the_new_one(tmp_path, caplog):
    path = tmp_path / "old.yaml"
    path.write_text("data:\n  train: embedded\n  test: [embedded:indomain]\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="clipmag"):
        cfg = build_config(TextConfig, path)
    assert (cfg.data.train, cfg.data.test) == ("bundled", ["bundled:indomain"])
    assert len(_warnings(caplog)) == 2 and all(str(path) in line for line in _warnings(caplog))


def test_an_unknown_bundled_part_is_still_named():
    cfg = build_config(TextConfig, None, ["data.test=[embedded:nowhere]"])
    assert cfg.data.test == ["bundled:nowhere"]  # respelled; the task refuses it naming the valid parts


def _stored_cell(argv: list[str]) -> Cell:
    record = json.loads((STORED_CELL / "cell.json").read_text(encoding="utf-8"))
    return Cell(
        record["group"], record["kind"], record["model"], record["head"], record["variant"], 0, STORED_CELL, argv
    )


def test_a_stored_cell_of_the_old_spelling_is_the_same_run_as_the_new_spelling(monkeypatch):
    monkeypatch.chdir(REPO)  # the stored argument list names configs/ relative to the repository
    stored = json.loads((STORED_CELL / "cell.json").read_text(encoding="utf-8"))["argv"]
    assert "data.test=[embedded:indomain]" in stored
    respelled = [a.replace("embedded:", "bundled:") for a in stored]
    assert run_identity(_stored_cell(stored)) == run_identity(_stored_cell(respelled)) is not None
    other = [a.replace("embedded:indomain", "bundled:outdomain") for a in stored]
    assert run_identity(_stored_cell(other)) != run_identity(_stored_cell(respelled))


def _sweep(tmp_path: Path, spelling: str) -> sweep.SweepConfig:
    group = sweep.SweepGroup(
        name="g", kind="text", heads=["cosine"], seeds=[0], args=[f"data.test=[{spelling}:indomain]"]
    )
    return sweep.SweepConfig(output_dir=str(tmp_path / "runs"), groups=[group])


def test_a_sweep_protocol_stored_with_the_old_spelling_is_the_same_protocol(tmp_path, caplog):
    record_start(_sweep(tmp_path, "embedded"))
    with caplog.at_level(logging.WARNING, logger="clipmag"):
        record_start(_sweep(tmp_path, "bundled"))
    assert "sweep config changed" not in caplog.text and len(read_protocol(tmp_path / "runs")) == 2
    with caplog.at_level(logging.WARNING, logger="clipmag"):
        record_start(_sweep(tmp_path, "other"))
    assert "sweep config changed" in caplog.text
