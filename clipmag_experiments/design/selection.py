"""Which of a sweep's cells one command runs, plans or reports on: ``--only`` names groups
(``tune``), one model's cells within a group (``tune/minilm``) or one head's cells of that model
(``tune/minilm/qnorm``), matched against the cells' group, model and head.

Why a model and not only a group: a sweep's starts may need different machines. A start whose
finished cells trained under bf16 autocast goes on only on a CPU with bf16 units, while a start
pinned to fp32 goes on anywhere; the sweep refuses to mix numerics within a start, so a sitting on
the other class of CPU runs the starts it can and leaves the rest, rather than none. Why a head:
a protocol's cut order names heads (the first to go when time runs short), so a sitting can run the
heads that are never cut before the one that may be.
"""

from __future__ import annotations

from collections.abc import Sequence

from clipmag.errors import ConfigError
from clipmag_experiments.design.expansion import split_model_entry
from clipmag_experiments.design.grid import Cell, SweepConfig

__all__ = ["check_only", "selected"]


def check_only(cfg: SweepConfig, only: Sequence[str], source: str) -> None:
    """Refuse an ``--only`` entry that names no group of ``cfg``, or a model its group lacks."""
    groups = {group.name: group for group in cfg.groups}
    unknown = sorted({entry.partition("/")[0] for entry in only} - set(groups))
    if unknown:
        raise ConfigError(
            f"{source}: --only names {', '.join(unknown)}, which is not a group (groups: {', '.join(groups)})"
        )
    for entry in only:
        name, model, head, *rest = [*entry.split("/"), "", ""]
        group = groups[name]
        models = [split_model_entry(m)[0] for m in group.models]
        if model and model not in models:
            raise ConfigError(
                f"{source}: --only names {entry}, but group {name!r} has no model {model!r} "
                f"(models: {', '.join(models) or 'none: its cells are named by the group alone'})"
            )
        if head and head not in group.heads or any(rest):
            raise ConfigError(
                f"{source}: --only names {entry}; write group, group/model or group/model/head "
                f"(heads of {name!r}: {', '.join(group.heads) or 'none'})"
            )


def selected(cell: Cell, only: Sequence[str]) -> bool:
    """Whether ``cell`` is one the command runs: every cell without ``only``, else a cell whose group,
    model and head agree with every part an entry names."""
    own = (cell.group, cell.model or "", cell.head or "")
    return not only or any(all(part == mine for part, mine in zip(entry.split("/"), own)) for entry in only)
