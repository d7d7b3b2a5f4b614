"""The text trainer refuses to validate on its test data (validation picks the exported checkpoint)."""

from __future__ import annotations

import pytest
import torch
from text_fixtures import write_code_search_set

from clipmag.config.build import build_config
from clipmag.config.checks import ConfigError
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
