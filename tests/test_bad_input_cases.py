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
    assert sorted(p.name for p in run.iterdir()) == ["notes.txt"]


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
    output = tmp_path / "eval"
    line = _one_error_line(capsys, main, ["--model", str(export), "--data", str(data), "--output", str(output)])
    assert line.startswith(f"error: {export / 'pytorch_model.bin'}: refused: not plain weights and data")
    assert not marker.exists() and not output.exists()  # refused before it began: no folder left


def test_loading_a_clip_export_does_not_say_its_weights_are_random(tmp_path, caplog):
    """open_clip warns "No pretrained weights loaded ... initialized randomly" for a model it builds
    without weights; clipmag loads every tensor of the export next, so the warning is not shown."""
    import logging

    import torch

    from clipmag.scoring.heads import build_head
    from clipmag.scoring.losses import InfoNCE
    from image_text.model.architecture import build_open_clip
    from image_text.model.clip_model import ClipMagModel
    from image_text.model.config import ClipModelConfig
    from image_text.model.export import export_open_clip
    from image_text.model.loading import load_clipmag

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


def _prepare_refusal(tmp_path, module: str) -> str:
    """The refusal of a sweep whose one prepare step runs ``module``; nothing may be written."""
    from clipmag_experiments.sweep.run import SweepConfig, SweepStep, run_sweep

    cfg = SweepConfig(output_dir=str(tmp_path / "runs"), prepare=[SweepStep(name="step", module=module)])
    with pytest.raises(ConfigError) as err:
        run_sweep(cfg, source="sweep.yaml")
    assert not (tmp_path / "runs").exists()
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"sweep.yaml: prepare step 'step': module {module!r}")
    return message


def test_a_prepare_step_is_checked_from_its_source_without_running_any_of_it(tmp_path, monkeypatch):
    """A folder without ``__init__.py``, a built-in module and ``main = None`` are refused as such, and
    a dotted step is found without running its package's ``__init__.py`` (which leaves a marker)."""
    code = tmp_path / "code"
    (code / "folder_only").mkdir(parents=True)
    (code / "not_a_function.py").write_text("def main(args):\n    return 0\n\n\nmain = None\n")
    (code / "pkg").mkdir()
    (code / "pkg" / "__init__.py").write_text(f"open({str(tmp_path / 'ran')!r}, 'w').close()\n")
    (code / "pkg" / "sub.py").write_text("def helper():\n    return 0\n")
    monkeypatch.syspath_prepend(str(code))
    assert "is a folder without __init__.py" in _prepare_refusal(tmp_path, "folder_only")
    assert "is Python's own (its standard library)" in _prepare_refusal(tmp_path, "math")
    assert "has no main(args) to call (main at line 5 is not a def)" in _prepare_refusal(tmp_path, "not_a_function")
    assert f"({code / 'pkg' / 'sub.py'}) has no main(args) to call" in _prepare_refusal(tmp_path, "pkg.sub")
    assert not (tmp_path / "ran").exists()


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has the CUDA device asked for")
@pytest.mark.parametrize("module", ["text_retrieval.cli", "image_text.cli"])
def test_a_cuda_device_the_machine_lacks_is_one_line_naming_the_key(tmp_path, capsys, module):
    import importlib

    run = tmp_path / "run"
    line = _one_error_line(
        capsys, importlib.import_module(module).main, ["train.device=cuda", f"train.output_dir={run}"]
    )
    assert line.startswith(
        "error: train.device=cuda: this run needs a CUDA device, and this machine has no CUDA device"
    )
    assert "set train.device=cpu" in line and not run.exists()


@pytest.mark.parametrize("tool", ["text_retrieval.cli:main", "clipmag_experiments.cli:sweep_main"])
def test_a_config_that_is_a_directory_is_named_as_such(tmp_path, capsys, tool):
    import importlib

    module, function = tool.split(":")
    folder = tmp_path / "configs"
    folder.mkdir()
    line = _one_error_line(capsys, getattr(importlib.import_module(module), function), ["--config", str(folder)])
    assert line == f"error: {folder}: is a directory, where a config file is expected; give the YAML file in it"


@pytest.mark.parametrize("inside", [False, True])
def test_an_index_corpus_that_is_a_directory_without_a_corpus_is_named_as_such(tmp_path, capsys, inside):
    """``--corpus DIR`` of no BEIR folder, or of a folder named ``corpus.jsonl``, says it is a directory."""
    from text_retrieval.serving.cli import main

    folder = tmp_path / ("corpus.jsonl" if inside else "beir")
    folder.mkdir()
    argv = ["build", "--model", "all-MiniLM-L6-v2", "--corpus", str(folder), "--output", str(tmp_path / "index")]
    line = _one_error_line(capsys, main, argv)
    assert line.startswith(f"error: --corpus {folder}: is a directory holding no corpus.jsonl[.gz]")
    assert not (tmp_path / "index").exists()


@pytest.fixture(scope="module")
def tiny_text(tmp_path_factory):
    """A 2-layer BERT and the stdlib code-search pairs as shards and a BEIR set."""
    from text_fixtures import write_code_search_set, write_tiny_bert

    root = tmp_path_factory.mktemp("refusals")
    write_tiny_bert(root / "bert")
    write_code_search_set(root)
    return root


@pytest.mark.parametrize("existing", [False, True], ids=["new folder", "existing folder"])
@pytest.mark.parametrize(
    "refused, named",
    [(["data.train={root}/no-such-shards"], "shard not found"), (["data.batch_size=1000"], "fewer than one global")],
    ids=["missing shard", "batch larger than the data"],
)
def test_a_training_refused_before_its_first_step_leaves_the_folder_as_it_found_it(
    tiny_text, tmp_path, capsys, existing, refused, named
):
    """Refused after the folder was accepted (its config.yaml, out.log and tensorboard/ written) but
    before a step ran: what the run wrote is removed, lock file and folder included."""
    from text_fixtures import tiny_train_args

    from text_retrieval.cli import main

    run = tmp_path / "run"
    if existing:
        run.mkdir()
        (run / "notes.txt").write_text("mine\n")
    extra = [word.format(root=tiny_text) for word in refused]
    line = _one_error_line(
        capsys, main, tiny_train_args(tiny_text / "bert", tiny_text, run, "train.tensorboard=true", *extra)
    )
    assert named in line
    assert sorted(p.name for p in run.iterdir()) == ["notes.txt"] if existing else not run.exists()


def test_an_evaluation_refused_before_it_began_leaves_no_folder(tiny_text, tmp_path, capsys):
    """A missing model, or an export whose weights would need unpickling: no folder, not even its lock."""
    from text_retrieval.evaluation.cli import main

    output = tmp_path / "eval"
    argv = ["--model", str(tmp_path / "no-such-model"), "--data", str(tiny_text / "beir"), "--output", str(output)]
    assert "no-such-model" in _one_error_line(capsys, main, argv)
    assert not output.exists()


def test_a_sweep_that_fails_in_prepare_leaves_no_output_folder(tmp_path, monkeypatch):
    from clipmag_experiments.sweep.run import SweepConfig, SweepStep, run_sweep

    code = tmp_path / "code"
    code.mkdir()
    (code / "failing_step.py").write_text("def main(args):\n    raise FileNotFoundError('no source data')\n")
    monkeypatch.syspath_prepend(str(code))
    cfg = SweepConfig(output_dir=str(tmp_path / "sweep"), prepare=[SweepStep(name="build", module="failing_step")])
    with pytest.raises(FileNotFoundError, match="no source data"):
        run_sweep(cfg)
    assert not (tmp_path / "sweep").exists()


def test_a_resume_on_rebuilt_shards_is_refused_unless_told_to_go_on(tiny_text, tmp_path, capsys):
    """Shards rebuilt with other pairs, then ``--resume latest``: one line naming the data and the
    key that goes on; with ``train.resume_other_data=true`` the run resumes on the new data."""
    import shutil

    from text_fixtures import tiny_train_args

    from clipmag.train.checkpoint.files import load_checkpoint
    from text_retrieval.cli import main
    from text_retrieval.data.training.shards import write_text_shards

    shards, run = tmp_path / "shards", tmp_path / "run"
    shutil.copytree(tiny_text / "shards", shards)
    base = tiny_train_args(tiny_text / "bert", tiny_text, run, f"data.train={shards}", "optim.schedule=constant")
    base += ["train.eval_every=0", "data.validation=[]"]
    run_entry_point(main, [*base, "train.steps=2"])
    saved = load_checkpoint(run / "checkpoints" / "latest.pt")["data_fingerprint"]
    pairs = [{"query": f"question {i}", "positive": f"answer {i}"} for i in range(40)]
    write_text_shards(pairs, shards, samples_per_shard=10, overwrite=True)
    resumed = [*base, "train.steps=3", "train.resume=latest"]
    line = _one_error_line(capsys, main, resumed)
    assert line.startswith(f"error: cannot resume: the training data {shards} is not what ")
    assert saved in line and line.endswith("or add train.resume_other_data=true to go on with this data")
    run_entry_point(main, [*resumed, "train.resume_other_data=true"])
    assert load_checkpoint(run / "checkpoints" / "latest.pt")["step"] == 3
