"""A long benchmark's finished parts are reused only by the same code on the same CPU.

``harness.measured_part`` keeps each finished part (a model, a store) so that a stopped run measures
only what is missing; a record names one code state and one CPU, so a part written by another commit
or another machine must be measured again rather than joined into it.
"""

from __future__ import annotations

import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))

import harness  # noqa: E402


def _counting(calls: list[int]):
    def measure() -> dict:
        calls.append(1)
        return {"rows": [len(calls)]}

    return measure


def test_a_finished_part_is_read_back(tmp_path):
    calls: list[int] = []
    part = tmp_path / "parts" / "model.json"
    first = harness.measured_part(part, {"weights": "abc"}, _counting(calls))
    again = harness.measured_part(part, {"weights": "abc"}, _counting(calls))
    assert calls == [1] and again["rows"] == first["rows"] == [1]


def test_another_commit_or_cpu_measures_again(tmp_path, monkeypatch):
    calls: list[int] = []
    part = tmp_path / "model.json"
    harness.measured_part(part, {"weights": "abc"}, _counting(calls))
    monkeypatch.setattr(harness, "code_at_start", lambda: {"commit": "another", "dirty": False})
    harness.measured_part(part, {"weights": "abc"}, _counting(calls))
    monkeypatch.setattr(harness, "cpu_name", lambda: "another CPU")
    done = harness.measured_part(part, {"weights": "abc"}, _counting(calls))
    assert calls == [1, 1, 1] and done["identity"]["cpu"] == "another CPU"


def test_other_inputs_measure_again(tmp_path):
    calls: list[int] = []
    part = tmp_path / "model.json"
    harness.measured_part(part, {"weights": "abc"}, _counting(calls))
    harness.measured_part(part, {"weights": "def"}, _counting(calls))
    assert len(calls) == 2
