"""Symbolic links out of a data folder are refused in one line that quotes none of the target, errors
quote only a short prefix of a line, and ``--overwrite`` never removes anything outside the run
folder: a linked ``export`` is unlinked (its target kept), a file under a linked folder is refused
before anything is removed, and the log names only what was removed."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import engine_worker
import pytest
from text_fixtures import write_beir

from clipmag.errors import ConfigError
from clipmag.storage.user_files import LinkOutError
from text_retrieval.data.loaders import DataFormatError, load_eval_datasets

SECRET = "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


def _beir(root: Path) -> Path:
    corpus = [{"_id": f"d{i}", "title": "", "text": f"document number {i}"} for i in range(3)]
    return write_beir(root, corpus, [{"_id": "q0", "text": "query"}], [("q0", "d0", 1)])


def _bright(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "documents.jsonl").write_text(json.dumps({"id": "d0", "content": "x"}) + "\n")
    (root / "examples.jsonl").write_text(json.dumps({"id": "q", "query": "y", "gold_ids": ["d0"]}) + "\n")
    return root


def _sts(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "pairs.tsv").write_text("".join(f"sentence {i}\tother {i}\t{i}\n" for i in range(4)))
    return root


@pytest.mark.parametrize(
    "make, name",
    [
        (_beir, "corpus.jsonl"),
        (_beir, "queries.jsonl"),
        (_beir, "qrels/test.tsv"),
        (_bright, "documents.jsonl"),
        (_sts, "pairs.tsv"),
    ],
)
def test_a_file_linked_out_of_its_data_folder_is_refused_quoting_nothing(make, name, tmp_path):
    secret = tmp_path / "home" / ".env"
    secret.parent.mkdir()
    secret.write_text(SECRET + "\n")
    folder = make(tmp_path / "data" / "set")
    (folder / name).unlink()
    (folder / name).symlink_to(secret)
    with pytest.raises(LinkOutError) as err:
        load_eval_datasets(folder)
    message = str(err.value)
    assert message.startswith(f"{folder / name} leads outside {folder} through a symbolic link (to {secret})")
    assert "AWS" not in message and "EXAMPLE" not in message and "\n" not in message


def test_links_inside_the_folder_and_a_linked_folder_are_followed(tmp_path):
    folder = _beir(tmp_path / "real" / "set")
    (folder / "queries.jsonl").rename(folder / "queries.v1.jsonl")
    (folder / "queries.jsonl").symlink_to("queries.v1.jsonl")  # inside the folder
    (tmp_path / "data").symlink_to(tmp_path / "real")  # the user's own link to the whole folder
    (dataset,) = load_eval_datasets(tmp_path / "data" / "set")
    assert dataset.queries == {"q0": "query"} and len(dataset.corpus_ids) == 3


def test_an_error_quotes_only_a_short_prefix_of_the_line(tmp_path):
    folder = _beir(tmp_path / "set")
    (folder / "corpus.jsonl").write_text(SECRET + " and the rest of a long line\n")
    with pytest.raises(DataFormatError) as err:
        load_eval_datasets(folder)
    quoted = str(err.value).split("invalid JSON (Expecting value): ")[1]
    assert quoted == repr(SECRET)[:40] + "..." and "EXAMPLEKEY" not in str(err.value)


# ---- --overwrite and links in the run folder -------------------------------------------------------


@pytest.fixture()
def clipmag_log(caplog: pytest.LogCaptureFixture):
    """The "clipmag" logger's records (each may come twice: through its handler and the root's)."""
    log = logging.getLogger("clipmag")
    log.addHandler(caplog.handler)
    caplog.set_level(logging.INFO, "clipmag")
    yield caplog
    log.removeHandler(caplog.handler)


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_overwrite_unlinks_a_linked_export_and_keeps_its_target(tmp_path, clipmag_log):
    out, elsewhere = tmp_path / "run", tmp_path / "shared" / "export"
    engine_worker.run(str(out), 8, ["head.name=cosine"])
    elsewhere.parent.mkdir()
    (out / "export").rename(elsewhere)
    (out / "export").symlink_to(elsewhere)
    kept = _files(elsewhere)
    engine_worker.run(str(out), 8, ["head.name=dot", "train.overwrite=true"])
    assert _files(elsewhere) == kept  # nothing outside the run folder was removed
    assert (out / "export").is_dir() and not (out / "export").is_symlink()  # the new run's own export
    (line,) = {r.getMessage() for r in clipmag_log.records if "replacing the run" in r.getMessage()}
    assert f"export (a link to {elsewhere}, which is kept)" in line


def test_overwrite_refuses_a_run_file_under_a_linked_folder_before_removing_anything(tmp_path, clipmag_log):
    out, scratch = tmp_path / "run", tmp_path / "scratch" / "checkpoints"
    scratch.parent.mkdir()
    out.mkdir()
    (out / "checkpoints").symlink_to(scratch, target_is_directory=True)
    scratch.mkdir()
    engine_worker.run(str(out), 8, ["head.name=cosine"])
    said = {r.getMessage() for r in clipmag_log.records if "symbolic link out of the run folder" in r.getMessage()}
    assert said == {f"checkpoints is a symbolic link out of the run folder: the run writes in {scratch}"}
    before, outside = _files(out), _files(scratch)
    assert "latest.pt" in outside
    with pytest.raises(ConfigError) as err:
        engine_worker.run(str(out), 8, ["head.name=dot", "train.overwrite=true"])
    message = str(err.value)
    assert f"{out / 'checkpoints'}/" in message and f"lies outside the run folder, in {scratch}" in message
    assert "nothing outside" in message and "\n" not in message
    assert _files(out) == before and _files(scratch) == outside
    assert not [r for r in clipmag_log.records if "removed" in r.getMessage()]
