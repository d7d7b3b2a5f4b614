"""The text trainer refuses to validate on its test data (validation picks the exported checkpoint):
the same folder and split, or the same queries under another path (a copy, a subset)."""

from __future__ import annotations

import shutil

import pytest
import torch
from conftest import REPO, run_python
from text_fixtures import tiny_train_args, write_beir, write_code_search_set, write_tiny_bert

from clipmag.config.build import build_config
from clipmag.errors import ConfigError
from clipmag.runtime.distributed import DistributedContext
from text_retrieval.config import TextConfig
from text_retrieval.task import TextRetrievalTask


def _task(*overrides: str) -> TextRetrievalTask:
    cfg = build_config(TextConfig, None, list(overrides))
    return TextRetrievalTask(cfg, DistributedContext(0, 1, 0, torch.device("cpu"), None))


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("guard")
    write_code_search_set(root)
    bright = root / "bright.yaml"
    bright.write_text(f"bright: {root / 'no-such-root'}\n")
    return root


def test_the_same_beir_split_for_validation_and_test_is_refused(data):
    beir = data / "beir"
    with pytest.raises(ConfigError, match="are the same data .* split 'test'.*validate on another split"):
        _task(f"data.validation=[{beir}]", f"data.test=[{beir / '.'}]", "data.validation_split=test")


def test_another_split_of_the_same_folder_is_allowed(data):
    beir = data / "beir"
    task = _task(f"data.validation=[{beir}]", f"data.test=[{beir}]", "data.validation_split=dev")
    assert [ds.split for ds in task.validation_sets] == ["dev"]


def test_data_without_splits_cannot_serve_both(data):
    with pytest.raises(ConfigError, match="are the same data"):
        _task(f"data.validation=[{data / 'bright.yaml'}]", f"data.test=[{data / 'bright.yaml'}]")


def test_a_copy_of_the_test_folder_as_validation_is_refused_by_content(data, tmp_path):
    beir = data / "beir"
    copy = shutil.copytree(beir, tmp_path / "elsewhere" / "beir")
    with pytest.raises(
        ConfigError, match=rf"data.validation '{copy}' and data.test '{beir}' hold the same data"
    ) as err:
        _task(f"data.validation=[{copy}]", f"data.test=[{beir}]", "data.validation_split=test")
    assert "\n" not in str(err.value) and "share 8 queries" in str(err.value)
    subset = write_beir(  # four of the test queries, rewritten: still the test data
        tmp_path / "subset",
        [{"_id": f"doc{i}", "text": f"passage {i}"} for i in range(4)],
        [{"_id": f"s{i}", "text": query} for i, query in enumerate(_test_queries(beir)[:4])],
        [(f"s{i}", f"doc{i}", 1) for i in range(4)],
        split="dev",
    )
    with pytest.raises(ConfigError, match="hold the same data by content: subset/dev and beir/test share 4 queries"):
        _task(f"data.validation=[{subset}]", f"data.test=[{beir}]")


def test_a_copy_of_another_split_passes(data, tmp_path):
    copy = shutil.copytree(data / "beir", tmp_path / "elsewhere" / "beir")
    task = _task(f"data.validation=[{copy}]", f"data.test=[{data / 'beir'}]", "data.validation_split=dev")
    assert [ds.split for ds in task.validation_sets] == ["dev"]


def test_the_trainer_refuses_a_copy_before_training(data, tmp_path):
    tiny_bert = write_tiny_bert(tmp_path / "bert")
    copy = shutil.copytree(data / "beir", tmp_path / "copy")
    args = tiny_train_args(tiny_bert, data, tmp_path / "run", f"data.validation=[{copy}]", "data.validation_split=test")
    proc = run_python(REPO / "scripts" / "train_text.py", args, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"data.validation '{copy}' and data.test '{data / 'beir'}' hold the same data by content" in proc.stderr
    assert not (tmp_path / "run" / "checkpoints").exists()


def _test_queries(beir) -> list[str]:
    from text_retrieval.data.loaders import load_beir

    return list(load_beir(beir, split="test").queries.values())
