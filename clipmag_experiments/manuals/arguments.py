"""A value mark's argument, split into the parts that name its row.

A value reads its argument as parts separated by ``/`` (``pr-mean:scifact/splade/scifact/dot``); a
mark with too few or too many is refused here, naming the value, before any part is read as the
wrong one.
"""

from __future__ import annotations

__all__ = ["argument_parts"]


def argument_parts(argument: str, count: int, name: str) -> list[str]:
    """``argument`` split at ``/`` into its ``count`` parts; a ValueError naming value ``name`` otherwise."""
    parts = argument.split("/")
    if len(parts) != count:
        raise ValueError(f"value {name}: expected {count} parts separated by '/', got {argument!r}")
    return parts
