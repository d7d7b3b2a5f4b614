"""What a sweep tells ``clipmag-sweep plan`` beyond its cells (the ``plan`` section of its YAML)."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["PlanSettings"]


@dataclass
class PlanSettings:
    """``cpu_pairs_per_second``: training pairs per second of each model label, measured on the CPU
    the sweep is to run on; the plan prices the cells in CPU-hours from them (training only).
    ``stand_ins``: per model label, a model of the same architecture to count while the label's own
    is not there yet (one a prepare step builds, e.g. a continued pretraining's export)."""

    cpu_pairs_per_second: dict[str, float] = field(default_factory=dict)
    stand_ins: dict[str, str] = field(default_factory=dict)
