"""Where users already are: open_clip loads a CLIP export by itself, and an export goes to the Hub
with its head record and model card (offline: the Hub client is a mock, checked up to the upload)."""

from __future__ import annotations

import json
from unittest.mock import MagicMock

import open_clip
import pytest
import torch

from clipmag.hub import main, push_export
from clipmag.scoring.head_record import HEAD_FILE
from clipmag.scoring.heads import build_head
from clipmag.scoring.losses import InfoNCE
from image_text.model.architecture import build_open_clip
from image_text.model.clip_model import ClipMagModel
from image_text.model.config import ClipModelConfig
from image_text.model.export import export_open_clip


@pytest.fixture(scope="module")
def clip_export(tmp_path_factory):
    torch.manual_seed(0)
    clip, _, _, tokenizer = build_open_clip(ClipModelConfig(name="clipmag-micro"))
    loss = InfoNCE(scale=10.0, direction="q2d")
    model = ClipMagModel(clip, build_head("learnable", gq=0.3, gd=0.9), loss, "image", "clipmag-micro").eval()
    return model, tokenizer, export_open_clip(model, tmp_path_factory.mktemp("clip") / "export")


def test_open_clip_alone_loads_the_export_with_our_features(clip_export):
    model, tokenizer, export = clip_export
    theirs, _, preprocess = open_clip.create_model_and_transforms(f"local-dir:{export}")  # open_clip only
    head = json.loads((export / HEAD_FILE).read_text())["head"]  # read beside it
    images, texts = torch.randn(4, 3, 16, 16), tokenizer(["top left 1", "top right 2", "bottom left 3", "x"])
    with torch.no_grad():
        torch.testing.assert_close(theirs.encode_image(images), model.encode_image(images))
        torch.testing.assert_close(theirs.encode_text(texts), model.encode_text(texts))
        scored = build_head(**head).score(theirs.encode_image(images), theirs.encode_text(texts))
        torch.testing.assert_close(scored, model.head.score(model.encode_image(images), model.encode_text(texts)))
    assert head["name"] == "learnable" and head["gq"] == pytest.approx(0.3) and preprocess is not None


def test_push_uploads_the_export_with_head_record_and_card(clip_export):
    _, _, export = clip_export
    api = MagicMock()
    api.upload_folder.return_value.commit_url = "https://huggingface.co/user/micro/commit/0"
    assert push_export(export, "user/micro", private=True, api=api) == "https://huggingface.co/user/micro/commit/0"
    api.create_repo.assert_called_once_with("user/micro", private=True, exist_ok=True)
    assert api.upload_folder.call_args.kwargs["folder_path"] == str(export)
    assert {HEAD_FILE, "README.md", "open_clip_config.json"} <= {p.name for p in export.iterdir()}
    card = (export / "README.md").read_text()
    assert "**image** tower" in card and "gq = 0.3" in card and "local-dir:" in card
    with pytest.raises(FileNotFoundError, match="not a clipmag export"):
        main([str(export.parent), "user/micro"])
