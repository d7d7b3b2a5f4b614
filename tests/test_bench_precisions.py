"""The precision benchmarks run bf16 sides only where the hardware computes bf16 natively.

A CPU without AVX-512 BF16 or AMX emulates bf16 (MiniLM training at 0.6 samples/s), so each
benchmark that compares precisions builds its sides through ``harness.select_sides``, which asks
the same predicate as ``precision=auto`` (``clipmag.runtime.precision``). The predicate is patched here,
in both directions, and the benchmarks' own side builders are called; no side is run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest
import torch

import clipmag.runtime.precision

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))

import harness  # noqa: E402


def _never_run() -> None:
    raise AssertionError("selecting the sides must not run them")


@pytest.fixture(params=[False, True], ids=["emulated-bf16", "native-bf16"])
def native(request, monkeypatch) -> bool:
    monkeypatch.setattr(clipmag.runtime.precision, "cpu_has_native_bf16", lambda: request.param)
    return request.param


def test_select_sides_keeps_bf16_only_where_native(native, capsys):
    chosen = harness.select_sides({"ours fp32": _never_run}, {"ours bf16": _never_run, "peer bf16": _never_run})
    out = capsys.readouterr().out
    if native:
        assert list(chosen) == ["ours fp32", "ours bf16", "peer bf16"]
        assert "skipped" not in out
    else:
        assert list(chosen) == ["ours fp32"]
        assert "skipped, because this cpu only emulates bf16" in out and "ours bf16, peer bf16" in out
    assert f"sides: {', '.join(chosen)}" in out
    assert harness.default_precision() == ("bf16" if native else "fp32")


def test_text_training_benchmark_drops_its_bf16_sides(native, capsys):
    import bench_train_text

    chosen = bench_train_text.sides(argparse.Namespace(before={}), Path("unused"), None, Path("unused"))
    expected = ["clipmag fp32", "ST fp32 (its default)"] + (["clipmag bf16", "ST bf16=True"] if native else [])
    assert list(chosen) == expected
    assert ("skipped" in capsys.readouterr().out) is not native


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CLIP trainers pick CUDA, whose bf16 is not patched here")
def test_clip_training_benchmark_keeps_the_peer_default(native, capsys):
    import bench_train_clip

    chosen = bench_train_clip.sides("unused", "unused", argparse.Namespace(before={}), Path("unused"))
    always = ["clipmag fp32", "open_clip fp32", "open_clip amp (default)"]
    assert list(chosen) == always + (["clipmag bf16", "open_clip amp_bf16"] if native else [])
    assert ("skipped" in capsys.readouterr().out) is not native


def test_print_comparison_names_the_ratios_it_could_not_measure(capsys):
    rates = {"clipmag fp32": [10.0, 12.0], "ST fp32 (its default)": [5.0, 6.0]}
    harness.print_comparison(rates, "samples/s", "ST fp32 (its default)", "ST bf16=True")
    lines = capsys.readouterr().out.splitlines()
    fp32 = next(line for line in lines if "fp32: clipmag / ST fp32" in line)
    assert "2.00 (2.00-2.00)" in fp32
    assert "not measured" in next(line for line in lines if "bf16: clipmag / ST bf16=True" in line)
    assert "not measured" in next(line for line in lines if "clipmag bf16 / clipmag fp32" in line)
