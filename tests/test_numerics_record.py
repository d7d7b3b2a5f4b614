"""A run's record names the machine its numbers came from - the CPU, its bf16 units and the kernels
torch picked - and the report prints it beside the kernels, so a figure's CPU is read, not recalled."""

from __future__ import annotations

from pathlib import Path

import pytest

from clipmag.results.record import numerics
from clipmag.runtime.machine import BF16_UNITS, cpu_name, cpuinfo
from clipmag_experiments.report.collect import CellResult
from clipmag_experiments.report.numerics import MixedNumerics, check_one_numerics, numerics_line


def test_the_record_names_the_cpu_and_the_bf16_units_it_has():
    record = numerics(None)
    assert record["cpu"] and record["cpu"] == cpu_name()
    flags = set(cpuinfo("flags").split())
    assert record["cpu_bf16"] == [unit for unit in BF16_UNITS if unit in flags]
    assert record["autocast"] == "fp32"


def test_the_report_names_each_cpu_counts_a_shared_run_once_and_keeps_older_records():
    new = {"device": "cpu", "cpu": "Intel Xeon", "cpu_bf16": ["avx512_bf16", "amx_bf16"], "autocast": "bfloat16"}
    old = {"device": "cpu", "autocast": "fp32", "cpu_capability": "AVX2"}
    cells = [
        CellResult(Path("a"), {}, {"numerics": {**new, "cpu_capability": "AVX512", "torch_threads": 2}}),
        CellResult(Path("b"), {}, {"numerics": {**old, "torch_threads": 2}}),
        # a cell that took the second cell's run (its record copied): the same run, not a third one
        CellResult(Path("c"), {"same_run_as": "lr-grid"}, {"numerics": {**old, "torch_threads": 2}}),
    ]
    assert numerics_line(cells) == (
        "Numerics: cpu (Intel Xeon, AVX512_BF16, AMX_BF16), autocast bfloat16, kernels AVX512, 2 threads (1 run); "
        "cpu, autocast fp32, kernels AVX2, 2 threads (1 run)."
    )


def test_a_start_whose_runs_computed_differently_is_refused_unless_allowed():
    bf16 = {"torch_threads": 2, "autocast": "bfloat16", "cpu_capability": "AVX512"}
    fp32 = {"torch_threads": 2, "autocast": "fp32", "cpu_capability": "AVX2"}
    cells = [
        CellResult(Path("start/splade/cosine/seed0"), {"group": "start", "model": "splade"}, {"numerics": bf16}),
        CellResult(Path("tune/splade/dnorm/seed0"), {"group": "tune", "model": "splade"}, {"numerics": fp32}),
        CellResult(Path("tune/minilm/dnorm/seed0"), {"group": "tune", "model": "minilm"}, {"numerics": fp32}),
    ]
    check_one_numerics(cells[1:])  # two starts, each computed alike
    refused = r"start 'splade' mixes numerics \(2 threads, bfloat16: start/splade\S*; 2 threads, fp32: tune/splade"
    with pytest.raises(MixedNumerics, match=refused + ".*--allow-mixed"):
        check_one_numerics(cells)
    check_one_numerics(cells, allow_mixed=True)
