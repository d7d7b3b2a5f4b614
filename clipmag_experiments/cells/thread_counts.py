"""Whether runs that one table would compare share a thread count: the last bits of a float result
shift with the count (the order of a reduction), so a group's cells are compared only at one count.

Plain data in, a sentence out, so the sweep (before it runs cells, :mod:`clipmag_experiments.sweep.packing`)
and any reader of finished runs ask the same question without importing torch.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["mixed_thread_counts"]


def mixed_thread_counts(runs: Iterable[tuple[str, str, int]]) -> str | None:
    """What mixes thread counts within a group among ``runs`` (group, label, threads), or None: the
    refusal's text, for a sweep about to run cells and for any reader of finished ones alike."""
    by_group: dict[str, dict[int, list[str]]] = {}
    for group, label, threads in runs:
        by_group.setdefault(group, {}).setdefault(threads, []).append(label)
    for group, counts in by_group.items():
        if len(counts) > 1:
            seen = "; ".join(f"{n} threads: {', '.join(labels[:2])}" for n, labels in sorted(counts.items()))
            return (
                f"group {group!r} mixes thread counts ({seen}); the last bits of a result depend on them, "
                "so one table holds one count"
            )
    return None
