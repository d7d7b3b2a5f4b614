"""The ``slurm`` sections of a sweep: what each cell's job asks of the cluster.

The sweep's ``slurm`` section sets every cell's resources and the scheduling (jobs in flight, how
often states are read); a group's ``slurm`` mapping puts single keys over it (``resources_for``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from clipmag.config.build import build
from clipmag.config.checks import NonNegativeInt, PositiveFloat, PositiveInt
from clipmag.errors import ConfigError

__all__ = ["SlurmResources", "SlurmSettings", "resources_for"]


@dataclass
class SlurmResources:
    """What one cell's job asks for. ``tasks_per_node``: processes per node (default: one per GPU,
    or one without GPUs); ``extra``: any other sbatch option, by its long name."""

    nodes: PositiveInt = 1
    gpus_per_node: NonNegativeInt = 0
    tasks_per_node: PositiveInt | None = None
    cpus_per_task: PositiveInt = 4
    mem_gb: PositiveFloat | None = None
    time_min: PositiveInt = 60
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    max_requeues: NonNegativeInt = 3  # requeues at a time limit (submitit's); preemptions are SLURM's, uncounted
    signal_delay_s: PositiveInt = 120  # SIGUSR2 this long before the time limit
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def tasks(self) -> int:
        return self.tasks_per_node or max(1, self.gpus_per_node)

    def executor_parameters(self) -> dict[str, Any]:
        """submitit's ``update_parameters`` keywords for these resources."""
        given = {
            "slurm_partition": self.partition,
            "slurm_account": self.account,
            "slurm_qos": self.qos,
            "slurm_constraint": self.constraint,
            "mem_gb": self.mem_gb,
        }
        return {
            "nodes": self.nodes,
            "tasks_per_node": self.tasks,
            "gpus_per_node": self.gpus_per_node,
            "cpus_per_task": self.cpus_per_task,
            "timeout_min": self.time_min,
            "slurm_signal_delay_s": self.signal_delay_s,
            "slurm_additional_parameters": {"requeue": True, **self.extra},
            **{k: v for k, v in given.items() if v is not None},
        }


@dataclass
class SlurmSettings(SlurmResources):
    """The sweep's ``slurm`` section: the resources of every cell, the cap on jobs queued or running
    at once and how often their states are read."""

    max_in_flight: PositiveInt = 16
    poll_s: PositiveFloat = 15.0


def resources_for(settings: SlurmSettings, overrides: Mapping[str, Any], group: str) -> SlurmResources:
    """The sweep's resources with a group's ``slurm`` keys put over them, checked key by key."""
    base = {f.name: getattr(settings, f.name) for f in dataclasses.fields(SlurmResources)}
    try:
        return build(SlurmResources, {**base, **overrides}, "slurm", f"sweep group {group!r}")
    except ConfigError as err:
        raise ConfigError(f"{err} (a group's slurm keys are those of the sweep's slurm section)") from None
