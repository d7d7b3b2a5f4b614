"""Resolve a sweep cell whose variant is chosen from an earlier group's results
(:class:`~clipmag_experiments.design.grid.VariantChoice`), e.g. each head's loss scale picked on a dev split.

The choice is made when the cell is about to run, from the finished cells of the selection group
with the same model and head, and written into the cell's ``cell.json`` (variant, metric, dataset
and every candidate's mean score), so the report and a reader can see what was chosen and why. A
grid lists its variants in order (scales from small to large), so a choice of its first or last
variant may have an optimum beyond it: ``at_grid_edge`` in ``cell.json`` says so, and a warning line
names the cell and the grid to widen. A candidate whose run diverged (its ``diverged.json``,
:mod:`clipmag.train.diverged_record`) counts as run and is never chosen; ``cell.json`` lists it
under ``diverged``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

from clipmag.results.record import RESULTS_FILE, read_results
from clipmag.train.diverged_record import read_divergence
from clipmag_experiments.cells.extension import GridWalk, walk_grid
from clipmag_experiments.design.grid import Cell

__all__ = ["VALIDATION", "choose_variant", "extension_needed", "has_run", "selection_score"]

VALIDATION = "validation"  # the ``dataset`` of a choice read from the run's own validation scores

logger = logging.getLogger("clipmag")


def selection_score(candidate: Cell, metric: str, dataset: str | None) -> float | None:
    """The candidate's ``metric`` on ``dataset`` (None: its run diverged and has no score)."""
    path = candidate.directory / RESULTS_FILE
    if not path.is_file() and read_divergence(candidate.directory) is not None:
        return None
    if not path.is_file():
        raise FileNotFoundError(
            f"sweep cell {candidate.label} has no {RESULTS_FILE}: choosing a variant needs its group finished first"
        )
    results = read_results(path)
    if dataset == VALIDATION:
        value = results["validation"].get(metric)
        if not isinstance(value, (int, float)):
            raise ValueError(
                f"{path}: no validation {metric!r} to choose a variant by; the run kept {sorted(results['validation'])}"
            )
        return float(value)
    metrics = results["metrics"]
    if dataset is None:
        if len(metrics) != 1:
            raise ValueError(f"{path}: {len(metrics)} test sets ({', '.join(metrics)}); name one in choose_variant")
        dataset = next(iter(metrics))
    value = (metrics.get(dataset) or {}).get(metric)
    if not isinstance(value, (int, float)):
        raise ValueError(f"{path}: no {metric!r} for test set {dataset!r} to choose a variant by")
    return float(value)


def has_run(cell: Cell) -> bool:
    """Whether ``cell`` ran to an outcome a choice can read: results, or a recorded divergence."""
    return (cell.directory / RESULTS_FILE).is_file() or read_divergence(cell.directory) is not None


def extension_needed(cell: Cell, metric: str, dataset: str | None, cells: Sequence[Cell]) -> str | None:
    """Why the grid-extension ``cell`` is not run now (None: its grid's walk needs it next)."""
    walk = walk_grid(
        cells,
        cell.group,
        cell.model,
        cell.head,
        lambda c: selection_score(c, metric, dataset),
        has_run,
    )
    if walk.needed == cell.variant:
        return None
    if walk.needed is not None:
        return f"not needed yet: the walk needs {walk.needed} first"
    return f"not needed: {_walk_end(walk)}"


def _walk_end(walk: GridWalk) -> str:
    """Why a finished walk runs no more extensions: its best is inside the grid read, or still on
    an edge with no extension left on that side, or every setting it read diverged."""
    read = f"{walk.best} of {', '.join(walk.order)}"
    if walk.best in walk.diverged:
        return f"every setting of the grid read ({', '.join(walk.order)}) diverged"
    edge = "low" if walk.best == walk.order[0] else "high" if walk.best == walk.order[-1] else None
    if edge is not None:
        return f"the best of the grid read ({read}) is still on its {edge} edge, with no {edge} extension left"
    return f"the best of the grid read ({read}) is inside it"


def choose_variant(cell: Cell, cells: Sequence[Cell]) -> Cell:
    """``cell`` with the arguments of its best candidate variant in place (unchanged without a choice).

    The chosen arguments go before the cell's own variant's, so a group may both choose (a learning
    rate, from another group) and list variants (the scales of a grid). A candidate that chose its
    own arguments in turn is resolved first, so a choice carries everything its candidate ran with
    (the learning rate a scale grid took, with the scale). A grid with an extension is read as far
    as its walk went (:mod:`clipmag_experiments.cells.extension`); an extension the walk still needs
    is an error, as an unfinished grid is."""
    choice = cell.choice
    if choice is None:
        return cell
    head = choice.head or cell.head
    walk = walk_grid(
        cells,
        choice.group,
        cell.model,
        head,
        lambda c: selection_score(c, choice.metric, choice.dataset),
        has_run,
    )
    if walk.needed is not None:
        raise FileNotFoundError(
            f"sweep cell {cell.label}: the best of group {choice.group!r} ({walk.best}) is on its edge and its "
            f"extension {walk.needed} has not run: choosing a variant needs its group finished first"
        )
    if walk.best in walk.diverged:
        raise ValueError(
            f"sweep cell {cell.label}: every setting of group {choice.group!r} read for head {head} diverged "
            f"({', '.join(walk.diverged)}): there is nothing to choose; widen the grid toward settings that train"
        )
    best = next(
        c
        for c in cells
        if c.group == choice.group and c.model == cell.model and c.head == head and str(c.variant) == walk.best
    )
    args = choose_variant(best, cells).variant_args
    chosen = {"from": choice.group, "variant": best.variant, "by": choice.metric, "dataset": choice.dataset}
    # At an end of the grid as walked (every declared extension spent): the optimum may lie beyond.
    at_edge = len(walk.order) > 1 and walk.best in (walk.order[0], walk.order[-1])
    chosen |= {"head": head, "args": list(args), "scores": walk.scores, "grid": walk.order, "extended": walk.extended}
    chosen |= {"diverged": walk.diverged} if walk.diverged else {}
    chosen["at_grid_edge"] = at_edge
    if at_edge:
        logger.warning(
            "sweep cell %s: variant %s of group %r is at the edge of its grid (%s); the best setting may lie "
            "beyond it: widen the grid",
            cell.label,
            walk.best,
            choice.group,
            ", ".join(walk.order),
        )
    argv = [*cell.argv[: cell.variant_at], *args, *cell.argv[cell.variant_at :]]
    return dataclasses.replace(cell, argv=argv, variant_args=[*args, *cell.variant_args], chosen=chosen)
