"""Nothing executes from a data file.

A ``.pt`` file whose pickle opens a marker file when it is read in full is handed to every loader
that takes a checkpoint or weights from a user: ``load_clipmag`` (a checkpoint, a run folder, an
older export), CLIP-benchmark's ``--pretrained``, the CLIP trainer's ``--init`` and
``--resume``, the text trainer's ``--resume latest`` and a sharded checkpoint. Each refuses in one
line naming the file, and the marker never appears. Legitimate files still load: a trainer's
checkpoint (now plain data, and in the form earlier versions wrote) resumes to the uninterrupted
run, and an older CLIP export with torch weights loads. A text export whose sentence-transformers
JSON names a module file in the folder never runs it through clipmag's loaders.
"""

from __future__ import annotations

import ast
import json
import pickle
import shutil
import sys
from pathlib import Path

import engine_worker
import numpy as np
import pytest
import torch
from conftest import REPO
from test_train_text import tiny_setup  # noqa: F401  (the tiny BERT fixture, found by name)
from text_fixtures import tiny_train_args

from clipmag.config.entry import run_entry_point
from clipmag.runtime.logs import read_metrics
from clipmag.scoring.heads import build_head
from clipmag.scoring.losses import InfoNCE
from clipmag.storage.folder_lock import LOCK_FILE
from clipmag.storage.safe_load import UnsafeFileError
from clipmag.train.checkpoint.files import load_checkpoint
from clipmag.train.sharded_reading import CheckedReader, check_metadata, load_checked
from image_text import cli as clip_cli
from image_text.cli import parse_args as parse_clip_args
from image_text.evaluation import benchmark
from image_text.model.architecture import build_open_clip
from image_text.model.clip_model import ClipMagModel
from image_text.model.config import ClipModelConfig
from image_text.model.export import export_open_clip
from image_text.model.loading import load_clipmag
from image_text.model.weights import LEGACY_WEIGHTS_FILE, WEIGHTS_FILE
from text_retrieval import cli as text_cli
from text_retrieval.cli import parse_args as parse_text_args
from text_retrieval.model.encoder import TextEncoder

FIXTURE_EXPORT = REPO / "tests" / "fixtures" / "export-23aebd0"  # a learnable-head text export
CLIP_MICRO = ["--model", "clipmag-micro", "data.bundled.train=16", "data.bundled.validation=4", "data.bundled.test=4"]
CLIP_MICRO += ["data.bundled.per_class=1", "train.device=cpu", "train.progress=false", "train.tensorboard=false"]


class Payload:
    """Read in full, it creates ``marker``: the trace of a loader that ran pickled code."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return open, (self.marker, "w")


@pytest.fixture()
def marker(tmp_path: Path) -> Path:
    path = tmp_path / "payload-ran"
    yield path
    assert not path.exists(), "a loader ran code from the file"


def payload_checkpoint(path: Path, marker: Path) -> Path:
    """A file shaped like a clipmag checkpoint that opens ``marker`` when unpickled in full."""
    path.parent.mkdir(parents=True, exist_ok=True)
    config = {"model": {"name": "clipmag-micro"}, "train": {}}
    torch.save({"state_dict": {}, "step": 1, "head": {"head": {"name": "cosine"}}, "config": config,
                "hook": Payload(marker)}, path)  # fmt: skip
    return path


def refused_line(text: str, path: Path) -> None:
    """``text`` is one line that names ``path`` and refuses it."""
    assert "\n" not in text.strip() and str(path) in text and "refused" in text, text


def written(folder: Path) -> list[str]:
    """What ``folder`` holds besides the lock a run takes on it first."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.name != LOCK_FILE)


def cli_error(main, argv: list[str], capsys) -> str:
    """The one line a command-line entry point ends on for ``argv`` (exit status 2, no traceback)."""
    with pytest.raises(SystemExit) as ended:
        run_entry_point(main, argv)
    err = capsys.readouterr().err
    assert ended.value.code == 2 and "Traceback" not in err
    return err.strip().splitlines()[-1]


# ---- the payload reaches no loader ---------------------------------------------------------------
def test_load_clipmag_refuses_a_payload_checkpoint_run_folder_and_export(tmp_path, marker):
    ckpt = payload_checkpoint(tmp_path / "payload.pt", marker)
    run_latest = payload_checkpoint(tmp_path / "run" / "checkpoints" / "latest.pt", marker)
    export = tmp_path / "export"
    export.mkdir()
    (export / "clipmag_head.json").write_text(json.dumps({"head": {"name": "cosine"}, "model_name": "clipmag-micro"}))
    (export / "open_clip_config.json").write_text(json.dumps({"model_cfg": {}, "preprocess_cfg": {}}))
    legacy_weights = shutil.copy(ckpt, export / LEGACY_WEIGHTS_FILE)
    for given, named in ((ckpt, ckpt), (tmp_path / "run", run_latest), (export, legacy_weights)):
        with pytest.raises(UnsafeFileError) as err:
            load_clipmag(given)
        refused_line(str(err.value), Path(named))
        assert "it calls io.open" in str(err.value)


def test_clip_benchmark_pretrained_refuses_a_payload(tmp_path, marker, monkeypatch, capsys):
    ckpt = payload_checkpoint(tmp_path / "payload.pt", marker)
    argv = ["eval", "--model_type", "clipmag", "--model", "x", "--pretrained", str(ckpt), "--dataset", "wds/x"]
    argv += ["--dataset_root", str(tmp_path), "--task", "zeroshot_retrieval", "--output", str(tmp_path / "o.json")]
    monkeypatch.setattr(sys, "argv", ["clipmag-eval-clip-benchmark", *argv])
    with pytest.raises(SystemExit) as ended:
        benchmark.entry()
    err = capsys.readouterr().err
    assert ended.value.code == 2 and "Traceback" not in err
    refused_line(err.strip().splitlines()[-1], ckpt)


@pytest.mark.parametrize("flag", ["--init", "--resume"])
def test_train_clip_refuses_a_payload(tmp_path, marker, capsys, flag):
    ckpt = payload_checkpoint(tmp_path / "payload.pt", marker)
    out = tmp_path / "run"
    refused_line(cli_error(clip_cli.main, [*CLIP_MICRO, "--output", str(out), flag, str(ckpt)], capsys), ckpt)
    assert written(out) == []  # refused before anything was written


def test_train_text_resume_latest_refuses_a_payload(tiny_setup, tmp_path, marker, capsys):  # noqa: F811
    out = tmp_path / "run"
    latest = payload_checkpoint(out / "checkpoints" / "latest.pt", marker)
    argv = tiny_train_args(tiny_setup / "tiny", tiny_setup, out, "--resume", "latest")
    refused_line(cli_error(text_cli.main, argv, capsys), latest)
    assert written(out) == ["checkpoints", "checkpoints/latest.pt"]  # nothing written


@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")  # DCP in one process, no group
def test_a_sharded_checkpoint_refuses_payload_metadata_and_values(tmp_path, marker):
    import torch.distributed.checkpoint as dcp

    plain = tmp_path / "plain"
    dcp.save({"w": torch.arange(4.0), "lr": 0.1, "betas": (0.9, 0.999)}, checkpoint_id=str(plain))
    check_metadata(plain)  # DCP's own records only
    checked = CheckedReader(str(plain)).read_metadata()
    assert checked.state_dict_metadata == dcp.FileSystemReader(str(plain)).read_metadata().state_dict_metadata
    state = {"w": torch.zeros(4), "lr": 0.0, "betas": None}
    load_checked(state, plain)
    assert torch.equal(state["w"], torch.arange(4.0)) and state["lr"] == 0.1 and state["betas"] == (0.9, 0.999)

    hooked = tmp_path / "hooked-value"
    dcp.save({"w": torch.zeros(4), "lr": Payload(marker)}, checkpoint_id=str(hooked))
    with pytest.raises(UnsafeFileError) as err:
        load_checked({"w": torch.zeros(4), "lr": 0.0}, hooked)
    refused_line(str(err.value), hooked)

    folder = tmp_path / "checkpoints" / "sharded-step00000002"
    shutil.copytree(plain, folder)
    torch.save({"state_dict": {}, "step": 2}, folder / "trainer.pt")
    assert load_checkpoint(folder)["step"] == 2
    (folder / ".metadata").write_bytes(pickle.dumps(Payload(marker)))  # DCP's metadata is a bare pickle
    with pytest.raises(UnsafeFileError):
        CheckedReader(str(folder)).read_metadata()  # the reader DCP is given never unpickles it unchecked
    with pytest.raises(UnsafeFileError) as err:
        load_checkpoint(folder)
    refused_line(str(err.value), folder / ".metadata")
    payload_checkpoint(folder / "trainer.pt", marker)
    with pytest.raises(UnsafeFileError, match="trainer.pt: refused"):
        load_checkpoint(folder)


# ---- legitimate files still load -----------------------------------------------------------------
def test_a_trainer_checkpoint_is_plain_data_and_older_ones_resume(tmp_path):
    """The toy task through the generic loop: a checkpoint loads with plain ``weights_only=True``, and
    one with numpy's RNG state as the array earlier versions saved resumes to the uninterrupted run."""
    full, crashed = tmp_path / "full", tmp_path / "crashed"
    engine_worker.run(str(full), 8, [])
    with pytest.raises(KeyboardInterrupt):
        engine_worker.run(str(crashed), 8, ["fail_at=6"])
    latest = crashed / "checkpoints" / "latest.pt"
    ckpt = torch.load(latest, weights_only=True)  # torch's own allowlist: nothing but tensors and plain data
    assert ckpt["step"] == 4
    for rank_state in ckpt["rng"]:  # as earlier versions wrote it: numpy's own tuple with an ndarray
        numpy = rank_state["numpy"]
        key = np.asarray(numpy["state"]["key"], dtype=np.uint32)
        rank_state["numpy"] = (numpy["bit_generator"], key, numpy["state"]["pos"], numpy["has_gauss"], numpy["gauss"])
    torch.save(ckpt, latest)
    with pytest.raises(Exception, match="numpy"):
        torch.load(latest, weights_only=True)
    engine_worker.run(str(crashed), 8, ["train.resume=latest"])
    losses = [[r["loss"] for r in read_metrics(run / "metrics.jsonl", "train")] for run in (full, crashed)]
    assert losses[1] == pytest.approx(losses[0], rel=1e-6)


def test_no_switch_reads_a_pickled_file_in_full(tmp_path, caplog):
    """A file that needs pickle is refused with advice, whatever the settings say: the retired
    train.trust_checkpoint key of a stored config is dropped with one line, and nothing in the
    library can load a file with weights_only=False."""
    own = tmp_path / "own.pt"
    torch.save({"state_dict": {}, "step": 3, "config": {"output": Path("runs/x")}}, own)
    with pytest.raises(UnsafeFileError, match=r"own.pt: refused: .*it calls pathlib.*re-save its tensors"):
        load_checkpoint(own)
    with caplog.at_level("WARNING", logger="clipmag"):
        for parse in (parse_clip_args, parse_text_args):
            cfg = parse(["train.trust_checkpoint=true"])
            assert not hasattr(cfg.train, "trust_checkpoint")
    assert sum("key 'train.trust_checkpoint' is no longer read" in r.getMessage() for r in caplog.records) == 2
    assert not _calls_with_weights_only_false()


def _calls_with_weights_only_false() -> list[str]:
    """Every call in the library's source that passes ``weights_only=False`` (file:line)."""
    found = []
    for path in [*(REPO / "clipmag").rglob("*.py"), *(REPO / "text_retrieval").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and any(
                k.arg == "weights_only" and isinstance(k.value, ast.Constant) and k.value.value is False
                for k in node.keywords
            ):
                found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    return found


def test_clip_exports_are_safetensors_and_older_torch_exports_load(tmp_path):
    torch.manual_seed(0)
    clip, _, _, _ = build_open_clip(ClipModelConfig(name="clipmag-micro"))
    model = ClipMagModel(clip, build_head("learnable", gq=0.3, gd=0.9), InfoNCE(10.0), "image", "clipmag-micro")
    export = export_open_clip(model, tmp_path / "export")
    names = {p.name for p in export.iterdir()}
    assert names == {WEIGHTS_FILE, "open_clip_config.json", "clipmag_head.json", "README.md"}
    older = shutil.copytree(export, tmp_path / "older")
    torch.save(model.clip.state_dict(), older / LEGACY_WEIGHTS_FILE)  # what earlier versions wrote
    (older / WEIGHTS_FILE).unlink()
    images = torch.randn(2, 3, 16, 16)
    for folder in (export, older):
        loaded, _, _ = load_clipmag(folder)
        with torch.no_grad():
            torch.testing.assert_close(loaded.encode_image(images), model.encode_image(images))
        assert loaded.head.to_dict() == model.head.to_dict()
        warm, _, _, _ = build_open_clip(ClipModelConfig(name="clipmag-micro", init=str(folder)))
        assert torch.equal(warm.state_dict()["text_projection"], model.clip.state_dict()["text_projection"])


# ---- sentence-transformers module types in a text export -----------------------------------------
def _export_naming_a_folder_module(folder: Path, marker: Path, where: str) -> Path:
    """The learnable fixture export with one module type pointing at ``evil.py`` in the folder."""
    shutil.copytree(FIXTURE_EXPORT, folder)
    (folder / "evil.py").write_text(
        f"open({str(marker)!r}, 'w').close()\n"
        "from sentence_transformers.base.modules import Router\n"
        "from text_retrieval.st_modules import NormPower\n"
    )
    config = folder / ("modules.json" if where == "modules" else "1_Router/router_config.json")
    text = config.read_text()
    old, new = ("sentence_transformers.base.modules.router.Router", "evil.Router")
    if where == "router":
        old, new = "text_retrieval.st_modules.NormPower", "evil.NormPower"
    config.write_text(text.replace(old, new))
    return folder


@pytest.mark.parametrize("where", ["modules", "router"])
def test_a_module_file_in_a_text_export_never_runs_in_clipmags_loaders(tmp_path, where, capsys):
    from sentence_transformers import SentenceTransformer

    marker = tmp_path / "module-ran"
    folder = _export_naming_a_folder_module(tmp_path / "export", marker, where)
    encoder = TextEncoder.from_pretrained(folder, precision="fp32")
    assert encoder.head.name == "learnable" and encoder.encode(["x"], "query", show_progress=False).shape[0] == 1
    with pytest.raises(ValueError, match="trust_remote_code"):
        SentenceTransformer(str(folder), device="cpu")
    assert not marker.exists()
    # What trust_remote_code=True allows (docs/text.md): a one-dot type runs its file from the folder.
    SentenceTransformer(str(folder), device="cpu", trust_remote_code=True)
    assert marker.exists()


def test_eval_text_never_runs_a_module_file_of_the_export(tiny_setup, tmp_path):  # noqa: F811
    from text_retrieval.evaluation.cli import main as eval_text

    marker = tmp_path / "module-ran"
    folder = _export_naming_a_folder_module(tmp_path / "export", marker, "router")
    out = tmp_path / "eval"
    eval_text(["--model", str(folder), "--data", str(tiny_setup / "beir"), "--output", str(out), "--quiet"])
    assert list(out.glob("*.json")) and not marker.exists()
