"""The one ``results.json`` schema of every training run (text, CLIP, sweep cell).

Readers (the report, later evaluators) read one shape, whatever front end wrote it::

    {
      "format_version": 1,
      "run": {"front_end": "text", "output_dir": ..., "objective": ..., "model": ...,
              "init": "pretrained",       # text runs; "random" adds "init_seed" (fresh weights)
              "seed": 0, "steps": 30, "world_size": 1},
      "head": {...},                      # the HeadRecord of the tested model, learned gammas included
      "checkpoint": {"path": "runs/x/export", "selection": "best", "step": 500,
                     "metric": "NDCG@10", "value": 0.61},   # what was tested, and why
      "validation": {"NDCG@10": ...},     # the last validation during training (flat)
      "metrics": {"<dataset>": {"<metric>": value, ..., "diagnostics": {...}}},
      "timings": {"train_seconds": ..., "test_seconds": ...},  # every attempt of a resumed run; with
                                          # "train_seconds_partial": true where an old checkpoint hid the earlier ones
      "versions": {"python": ..., "clipmag": ..., "torch": ..., ...},
      "numerics": {"torch_threads": 2, "cpu": "Intel(R) Xeon(R) ...", "cpu_bf16": ["avx512_bf16", "amx_bf16"],
                   "cpu_capability": "AVX512", "autocast": "bfloat16", ...},
      "provenance": {"code": {"commit": ..., "dirty": false, "diff_sha256": null, "reason": null},
                     "command": {"argv": [...]}, "config": {...}, "config_sha256": ...},
      "created": "2026-11-30T12:00:00"
    }

``provenance`` (:mod:`clipmag.results.provenance`) names the commit and settings that made the numbers;
files written before it existed lack it, which the report treats as "no commit recorded".
"""

from __future__ import annotations

import json
import platform
import time
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clipmag.results.provenance import provenance
from clipmag.runtime.machine import bf16_units, cpu_name
from clipmag.scoring.head_record import HeadRecord
from clipmag.storage.files import write_text_atomic
from clipmag.storage.user_files import read_json

if TYPE_CHECKING:
    import torch

RESULTS_FILE = "results.json"
RESULTS_VERSION = 1
_PACKAGES = (
    "clipmag",
    "torch",
    "transformers",
    "sentence-transformers",
    "open_clip_torch",
    "faiss-cpu",
    "pytrec-eval-terrier",
    "numpy",
    "scipy",
)


def installed_versions(distributions: Sequence[str]) -> dict[str, str]:
    """Each distribution's installed version (``not installed`` when absent)."""
    versions = {}
    for name in distributions:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def package_versions(extra: Sequence[str] = ()) -> dict[str, str]:
    """Versions of Python and the libraries that decide a number, plus ``extra`` distributions."""
    return {"python": platform.python_version(), **installed_versions([*_PACKAGES, *extra])}


def numerics(autocast: torch.dtype | None) -> dict[str, Any]:
    """What decides the last bits of every number: float results shift with the thread count
    (reduction order) and with the CPU kernels torch picks (AVX2 vs AVX-512, bf16 on AVX-512 BF16 or
    AMX), and on a short run those last bits can grow into points of a metric, so they are recorded
    with the numbers, with the CPU's name, which a figure's time is quoted beside."""
    import torch  # here, not at the top: the tools that only name RESULTS_FILE or read a record need none

    return {
        "torch_threads": torch.get_num_threads(),
        "cpu": cpu_name(),
        "cpu_bf16": bf16_units(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "autocast": str(autocast).replace("torch.", "") if autocast is not None else "fp32",
        "device": "cuda" if torch.cuda.is_available() else "cpu",
    }


def encoding_numerics(precision: str, device: torch.device) -> dict[str, Any]:
    """The numerics block of an evaluation's or a miner's record: the ``precision`` asked for, the
    autocast dtype it resolves to on ``device``, and the threads and CPU kernels (as a run records)."""
    from clipmag.runtime.precision import autocast_dtype

    return {"precision": precision, **numerics(autocast_dtype(precision, device)), "device": device.type}


def build_results(
    run: Mapping[str, Any],
    head: HeadRecord,
    checkpoint: Mapping[str, Any],
    metrics: Mapping[str, Mapping[str, Any]],
    validation: Mapping[str, Any],
    timings: Mapping[str, float],
    numerics: Mapping[str, Any] | None = None,
    config: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A results record in the schema above; ``config`` is the run's resolved config (``to_dict``)."""
    return {
        "format_version": RESULTS_VERSION,
        "run": dict(run),
        "head": head.to_dict(),
        "checkpoint": dict(checkpoint),
        "validation": dict(validation),
        "metrics": {name: dict(values) for name, values in metrics.items()},
        "timings": dict(timings),
        "versions": package_versions(),
        "numerics": dict(numerics or {}),
        "provenance": provenance(config),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }


def write_results(record: Mapping[str, Any], directory: str | Path) -> Path:
    """Write ``<directory>/results.json`` atomically (a sweep treats its presence as "finished")."""
    return write_text_atomic(
        Path(directory) / RESULTS_FILE, json.dumps(record, indent=1, default=str, allow_nan=True) + "\n"
    )


def read_results(path: str | Path) -> dict[str, Any]:
    """Read and check a ``results.json``; the error names the file and the missing key."""
    path = Path(path)
    record = read_json(path)
    if not isinstance(record, dict) or record.get("format_version") != RESULTS_VERSION:
        raise ValueError(f"{path}: expected a clipmag results file with format_version {RESULTS_VERSION}")
    for key in ("run", "head", "metrics"):
        if key not in record:
            raise ValueError(f"{path}: missing key {key!r}")
    HeadRecord.from_dict(record["head"], source=f"{path}: 'head'")
    return record
