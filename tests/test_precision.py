"""Precision selection: ``auto`` follows torch's capability queries, fp32 can be forced, bf16
encoding stays close to fp32, and heads, losses, weights and optimizer state stay fp32."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from text_fixtures import minilm_encoder, minilm_path

from clipmag.config.build import build_config
from clipmag.runtime import precision
from clipmag.runtime.distributed import DistributedContext
from clipmag.scoring.heads import build_head
from clipmag.scoring.losses import InfoNCE
from clipmag.train.checkpoint.files import load_checkpoint
from image_text.evaluation.retrieval import encode as clip_encode
from text_retrieval.config import TextConfig
from text_retrieval.model.encoder import TextEncoder
from text_retrieval.task import TextRetrievalTask

CPU = torch.device("cpu")
TEXTS = ["Aspirin reduces the risk of heart attack.", "x", "The mitochondria is the powerhouse of the cell."]


@pytest.fixture
def fake_cpu(monkeypatch):
    """Set what torch's CPU capability queries answer; returns the setter."""

    def answer(mkldnn: bool = True, avx512_bf16: bool = False, amx: bool = False, machine: str = "x86_64") -> None:
        monkeypatch.setattr(torch.backends.mkldnn, "is_available", lambda: mkldnn)
        monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16)
        monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
        monkeypatch.setattr(precision.platform, "machine", lambda: machine)
        precision.cpu_has_native_bf16.cache_clear()

    yield answer
    precision.cpu_has_native_bf16.cache_clear()


@pytest.mark.parametrize(
    "answers, expected",
    [
        ({"avx512_bf16": True}, torch.bfloat16),
        ({"amx": True}, torch.bfloat16),
        ({}, None),  # plain AVX-512 or AVX2: bf16 would be emulated
        ({"mkldnn": False, "avx512_bf16": True}, None),
    ],
)
def test_auto_picks_bf16_exactly_when_the_cpu_has_it(fake_cpu, answers, expected):
    fake_cpu(**answers)
    assert precision.autocast_dtype("auto", CPU) is expected


def test_auto_asks_onednn_on_arm(fake_cpu, monkeypatch):
    fake_cpu(machine="aarch64")
    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: True)
    assert precision.autocast_dtype("auto", CPU) is torch.bfloat16


def test_auto_matches_this_machine():
    native = torch.backends.mkldnn.is_available() and (
        torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()
    )
    assert precision.cpu_has_native_bf16() == native


def test_forced_settings_and_unknown_names(fake_cpu):
    fake_cpu(avx512_bf16=True)
    assert precision.autocast_dtype("fp32", CPU) is None
    assert precision.autocast_dtype("bf16", CPU) is torch.bfloat16
    assert precision.autocast_dtype("fp16", CPU) is torch.float16
    with pytest.raises(ValueError, match="unknown precision 'bfloat16'; valid: auto, fp32, bf16, fp16"):
        precision.autocast_dtype("bfloat16", CPU)
    with pytest.raises(ValueError, match="unknown precision"):
        TextEncoder(minilm_encoder().model, minilm_encoder().tokenizer, precision="half")


def test_bf16_encode_stays_close_to_fp32():
    fp32 = minilm_encoder(precision="fp32").encode(TEXTS, "document", show_progress=False)
    bf16 = minilm_encoder(precision="bf16").encode(TEXTS, "document", show_progress=False)
    assert bf16.dtype == np.float32 and not np.array_equal(bf16, fp32)  # bf16 really ran
    cosine = (fp32 * bf16).sum(1) / np.linalg.norm(fp32, axis=1) / np.linalg.norm(bf16, axis=1)
    assert cosine.min() > 0.999
    np.testing.assert_allclose(np.linalg.norm(bf16, axis=1), np.linalg.norm(fp32, axis=1), rtol=5e-3)
    auto = minilm_encoder().encode(TEXTS, "document", show_progress=False)
    np.testing.assert_array_equal(auto, bf16 if precision.cpu_has_native_bf16() else fp32)


def test_heads_and_loss_compute_in_fp32_under_autocast():
    torch.manual_seed(0)
    tower = torch.nn.Linear(8, 4)
    loss, head = InfoNCE(scale=20.0, direction="q2d"), build_head("learnable")
    with precision.autocast(CPU, torch.bfloat16):
        q, d = tower(torch.randn(5, 8)), tower(torch.randn(5, 8))
        assert q.dtype == torch.bfloat16  # the tower did run in bf16
        out = loss(q, d, head)
        assert head.score(q, d).dtype == torch.float32
    assert out["loss"].dtype == torch.float32


def test_clip_encode_runs_towers_in_the_chosen_precision():
    tower = torch.nn.Linear(8, 4)
    inputs = torch.randn(10, 8)
    seen: list[torch.dtype] = []

    def fn(x: torch.Tensor) -> torch.Tensor:
        out = tower(x)
        seen.append(out.dtype)
        return out

    assert clip_encode(fn, inputs, 4, CPU, precision="bf16").dtype == torch.float32
    assert clip_encode(fn, inputs, 4, CPU, precision="fp32").dtype == torch.float32
    assert seen == [torch.bfloat16] * 3 + [torch.float32] * 3


def test_bf16_training_keeps_fp32_weights_and_optimizer_state(tmp_path):
    import engine_worker

    engine_worker.run(str(tmp_path), 8, ["train.steps=2", "train.precision=bf16"])
    ckpt = load_checkpoint(tmp_path / "checkpoints" / "latest.pt")
    assert {t.dtype for t in ckpt["state_dict"].values() if t.is_floating_point()} == {torch.float32}
    states = [v for s in ckpt["optimizer"]["state"].values() for k, v in s.items() if k != "step"]
    assert states and {t.dtype for t in states} == {torch.float32}


@pytest.mark.parametrize("chosen", ["fp32", "bf16"])
def test_a_text_run_validates_and_tests_in_its_train_precision(chosen, tmp_path):
    """Pinned to a precision that ``auto`` would not pick here (fp32 where the CPU has bf16 units,
    bf16 where it has none), a run's validation encoder and the export its test loads encode in it,
    as its record's numerics say."""
    args = [f"model.name={minilm_path()}", "data.validation=[]", f"train.precision={chosen}"]
    task = TextRetrievalTask(build_config(TextConfig, None, args), DistributedContext(0, 1, 0, CPU, None))
    encoder = task.build_encoder()
    assert encoder.precision == chosen
    encoder.save_pretrained(tmp_path)
    assert task.load_export(tmp_path).precision == chosen
