"""Bad input named in one line, case by case: a directory where a file is expected, a run that never
started (it leaves no run folder), a sweep's prepare step without ``main()``, an export whose
weights would need unpickling, a zero-size split, missing evaluation data (the line says how to
fetch it)."""

from __future__ import annotations

import pytest
from text_fixtures import write_beir

from clipmag.config.entry import run_entry_point
from clipmag.errors import ConfigError


def _one_error_line(capsys, main, argv) -> str:
    with pytest.raises(SystemExit) as stop:
        run_entry_point(main, argv)
    assert stop.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines and lines[-1].startswith("error: ") and "Traceback" not in "\n".join(lines)
    return lines[-1]


def test_a_directory_where_a_file_is_expected_is_named_as_such(tmp_path, capsys):
    from text_retrieval.evaluation.cli import main

    texts = [{"_id": "d1", "text": "a"}], [{"_id": "q1", "text": "a"}]
    folder = write_beir(tmp_path / "beir", *texts, [("q1", "d1", 1)])
    (folder / "corpus.jsonl").unlink()
    (folder / "corpus.jsonl").mkdir()
    line = _one_error_line(capsys, main, ["--model", "all-MiniLM-L6-v2", "--data", str(folder)])
    assert line.startswith(f"error: {folder / 'corpus.jsonl'}: is a directory, where a file is expected")


def test_a_run_that_never_started_leaves_no_run_folder(tmp_path, capsys):
    from text_retrieval.cli import main

    run = tmp_path / "run"
    argv = [f"model.name={tmp_path / 'no-such-model'}", f"train.output_dir={run}", "train.device=cpu"]
    line = _one_error_line(capsys, main, argv)
    assert "no-such-model" in line
    assert not run.exists()


def test_a_run_into_an_existing_folder_that_never_started_leaves_it_as_it_was(tmp_path, capsys):
    from text_retrieval.cli import main

    run = tmp_path / "run"
    run.mkdir()
    (run / "notes.txt").write_text("mine\n")
    _one_error_line(capsys, main, [f"model.name={tmp_path / 'no-such-model'}", f"train.output_dir={run}"])
    assert sorted(p.name for p in run.iterdir()) == [".clipmag.lock", "notes.txt"]


def test_every_prepare_step_is_checked_before_any_runs(tmp_path):
    """A valid step first, then a module without ``main`` and one that is not installed: the sweep
    names both and runs nothing (not even the valid step), writing nothing."""
    import toy_prepare

    from clipmag_experiments.sweep.run import SweepConfig, SweepStep, run_sweep

    toy_prepare.CALLS.clear()
    target = str(tmp_path / "prepared" / "done.txt")
    steps = [
        SweepStep(name="make", module="toy_prepare", args=[target], creates=target),
        SweepStep(name="no-main", module="clipmag.errors"),
        SweepStep(name="absent", module="clipmag_no_such_module"),
    ]
    cfg = SweepConfig(output_dir=str(tmp_path / "runs"), prepare=steps)
    with pytest.raises(ConfigError) as err:
        run_sweep(cfg, source="sweep.yaml")
    message = str(err.value)
    assert "\n" not in message and message.startswith("sweep.yaml: prepare step 'no-main': module 'clipmag.errors'")
    assert "has no main(args) to call" in message
    assert "prepare step 'absent': module 'clipmag_no_such_module' is not importable" in message
    assert toy_prepare.CALLS == [] and not (tmp_path / "runs").exists() and not (tmp_path / "prepared").exists()


@pytest.mark.parametrize("split", ["train", "validation", "test"])
def test_an_empty_bundled_clip_split_is_refused_naming_its_key(split):
    from image_text.cli import parse_args

    with pytest.raises(ConfigError, match=rf"key 'data.bundled.{split}' expects int >= 1, got 0"):
        parse_args([f"data.bundled.{split}=0"])


class _Payload:
    """Read in full, it creates ``marker``: the trace of a loader that ran pickled code."""

    def __init__(self, marker) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return open, (self.marker, "w")


def test_a_text_export_with_pickled_weights_is_refused_naming_the_file(tmp_path, capsys):
    import torch
    from text_fixtures import write_tiny_bert
    from transformers import AutoModel

    from text_retrieval.evaluation.cli import main

    export = write_tiny_bert(tmp_path / "export")
    state = AutoModel.from_pretrained(export).state_dict()
    for weights in export.glob("*.safetensors"):
        weights.unlink()
    marker = tmp_path / "ran"
    torch.save({**state, "extra": _Payload(marker)}, export / "pytorch_model.bin")
    data = write_beir(tmp_path / "beir", [{"_id": "d1", "text": "a"}], [{"_id": "q1", "text": "a"}], [("q1", "d1", 1)])
    line = _one_error_line(capsys, main, ["--model", str(export), "--data", str(data)])
    assert line.startswith(f"error: {export / 'pytorch_model.bin'}: refused: not plain weights and data")
    assert not marker.exists()


def test_loading_a_clip_export_does_not_say_its_weights_are_random(tmp_path, caplog):
    """open_clip warns "No pretrained weights loaded ... initialized randomly" for a model it builds
    without weights; clipmag loads every tensor of the export next, so the warning is not shown."""
    import logging

    import torch

    from clipmag.scoring.heads import build_head
    from clipmag.scoring.losses import InfoNCE
    from image_text.model import ClipMagModel, ClipModelConfig, build_open_clip, export_open_clip, load_clipmag

    clip, _, _, _ = build_open_clip(ClipModelConfig(name="clipmag-micro"))
    model = ClipMagModel(clip, build_head("dnorm"), InfoNCE(10.0), "image", "clipmag-micro")
    export = export_open_clip(model, tmp_path / "export")
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        loaded, _, _ = load_clipmag(export)
    assert not [r for r in caplog.records if "initialized randomly" in r.getMessage()]
    for name, tensor in model.clip.state_dict().items():
        torch.testing.assert_close(loaded.clip.state_dict()[name], tensor)


@pytest.mark.parametrize("kind, name", [("beir", "scifact"), ("sts", "stsbenchmark")])
def test_missing_evaluation_data_names_the_command_that_fetches_it(tmp_path, capsys, kind, name):
    from text_retrieval.evaluation.cli import main

    missing = tmp_path / "data" / kind / name
    line = _one_error_line(capsys, main, ["--model", "all-MiniLM-L6-v2", "--data", str(missing)])
    command = f"python -m text_retrieval.data.download {kind} {name} {missing.parent}"
    assert line == f"error: evaluation data not found: {missing}; fetch it with: {command}"


def test_the_loaders_name_every_sts_set_the_fetcher_downloads():
    """The missing-data line names a fetch command for exactly the STS sets the fetcher knows."""
    from text_retrieval.data.fetch import STS_SOURCES
    from text_retrieval.data.loaders import FETCHED_STS

    assert set(FETCHED_STS) == set(STS_SOURCES)
