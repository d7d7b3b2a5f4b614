"""One tower from another model (``model.image_init`` / ``model.text_init``) and locked towers
(``model.lock_image`` / ``model.lock_text`` with open_clip's options): which weights move, which the
optimizer holds, and one-line refusals of a source that does not fit."""

from __future__ import annotations

import json

import pytest
import torch

from clipmag.errors import ConfigError
from clipmag.scoring.heads import build_head
from clipmag.scoring.losses import InfoNCE
from clipmag.train.optim_config import OptimConfig
from clipmag.train.optimizer import build_optimizer
from image_text.cli import parse_args
from image_text.model.architecture import build_open_clip
from image_text.model.clip_model import ClipMagModel
from image_text.model.config import MODEL_CONFIG_DIR, ClipModelConfig
from image_text.model.export import export_open_clip
from image_text.model.towers import tower_keys


def micro(seed: int, **settings) -> torch.nn.Module:
    torch.manual_seed(seed)
    return build_open_clip(ClipModelConfig(name="clipmag-micro", **settings))[0]


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """An export whose weights differ from every other seed's."""
    clip = micro(seed=5)
    model = ClipMagModel(clip, build_head("cosine"), InfoNCE(scale=10.0), "image", "clipmag-micro")
    return clip.state_dict(), export_open_clip(model, tmp_path_factory.mktemp("source") / "export")


@pytest.mark.parametrize("side", ["image", "text"])
def test_init_takes_one_tower_and_leaves_the_other(source, side):
    weights, export = source
    own = micro(seed=1).state_dict()
    mixed = micro(seed=1, **{f"{side}_init": str(export)}).state_dict()
    taken = set(tower_keys(own, side))
    assert taken and len(taken) < len(own)
    for key in own:
        expected = weights[key] if key in taken else own[key]
        assert torch.equal(mixed[key], expected), key


def test_init_from_a_checkpoint_file_and_refusals(source, tmp_path):
    weights, export = source
    torch.save({"state_dict": weights, "epoch": 3}, tmp_path / "open_clip.pt")  # open_clip's checkpoint layout
    mixed = micro(seed=1, image_init=str(tmp_path / "open_clip.pt")).state_dict()
    assert torch.equal(mixed["visual.conv1.weight"], weights["visual.conv1.weight"])
    with pytest.raises(ConfigError, match="model.image_init=.*: no image tower of clipmag-tiny there .it lacks visual"):
        build_open_clip(ClipModelConfig(name="clipmag-tiny", image_init=str(export)))  # two layers, not one
    narrow = json.loads((MODEL_CONFIG_DIR / "clipmag-micro.json").read_text())
    narrow["vision_cfg"]["width"] = 16
    (tmp_path / "narrow-micro.json").write_text(json.dumps(narrow))
    with pytest.raises(ConfigError, match=r"does not fit narrow-micro: visual\.\S+ has shape \[32.*\] there and \[16"):
        build_open_clip(ClipModelConfig(name=str(tmp_path / "narrow-micro.json"), image_init=str(export)))
    with pytest.raises(ConfigError, match="model.text_init=no-such-tag: not a file or folder, and not an open_clip"):
        micro(seed=1, text_init="no-such-tag")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="no weights there"):
        micro(seed=1, image_init=str(tmp_path / "empty"))


def trainable(model: torch.nn.Module) -> set[str]:
    return {name for name, p in model.named_parameters() if p.requires_grad}


def test_locks_follow_open_clips_options():
    everything = set(dict(micro(seed=0).named_parameters()))
    image = {k for k in everything if k.startswith("visual.")}
    assert trainable(micro(seed=0, lock_image=True)) == everything - image
    partly = trainable(micro(seed=0, lock_image=True, lock_image_unlocked_groups=1))
    assert partly & image == {"visual.proj"}  # open_clip's last group of a ViT: the projection
    text = everything - image - {"logit_scale"}
    assert trainable(micro(seed=0, lock_text=True)) == image | {"logit_scale"}
    last = trainable(micro(seed=0, lock_text=True, lock_text_unlocked_layers=1)) & text
    assert last == {"text_projection"}  # the last of open_clip's text groups
    norms = trainable(micro(seed=0, lock_text=True, lock_text_freeze_layer_norm=False)) & text
    assert norms and all(".ln_" in k or k.startswith("ln_final") for k in norms)


def test_lock_options_without_their_lock_are_refused():
    for argv, key in (
        (["model.lock_image_unlocked_groups=1"], "model.lock_image_unlocked_groups is set but model.lock_image"),
        (["model.lock_text_freeze_layer_norm=false"], "model.lock_text_freeze_layer_norm=false is set"),
    ):
        with pytest.raises(ConfigError, match=key):
            parse_args(argv)
    cfg = parse_args(["--lock-image", "--lock-text", "model.lock_text_unlocked_layers=1"])
    assert (cfg.model.lock_image, cfg.model.lock_text, cfg.model.lock_text_unlocked_layers) == (True, True, 1)


def test_the_optimizer_holds_nothing_of_a_locked_tower_and_a_step_leaves_it_bitwise():
    clip = micro(seed=0, lock_image=True)
    model = ClipMagModel(clip, build_head("qnorm"), InfoNCE(scale=10.0, learnable_scale=True), "image", "clipmag-micro")
    before = {k: v.clone() for k, v in model.state_dict().items()}
    optimizer = build_optimizer(model, OptimConfig(lr=1e-2, weight_decay=0.1))
    held = {id(p) for group in optimizer.param_groups for p in group["params"]}
    locked = [p for n, p in clip.named_parameters() if n.startswith("visual.")]
    assert locked and not held & {id(p) for p in locked}
    tokens = torch.randint(0, 100, (4, 20))
    model((torch.randn(4, 3, 16, 16), tokens))["loss"].backward()
    optimizer.step()
    assert not {id(p) for p in optimizer.state} & {id(p) for p in locked}
    after = model.state_dict()
    assert all(torch.equal(after[k], before[k]) for k in before if k.startswith("visual."))
    assert not torch.equal(after["text_projection"], before["text_projection"])
