"""A sweep carried across machines by its archive: finished cells restored from the small files an
earlier sitting archived (:mod:`clipmag_experiments.sweep.archive`), so a sweep of many CPU-hours
goes on where it stopped on a machine that kept none of its run folders.

Why: a long sweep runs in sittings, and a sitting's machine may keep nothing but the repository.
Its finished cells' results are committed as they come (``archive``); the next sitting names that
folder (``restore_from`` in the sweep config) and the sweep copies each archived cell that its own
folder lacks back in, with ``restored.json`` saying from where. A restored cell counts as finished
without the checkpoint and export its results name (they stayed on the machine that trained it),
so a choice reads its dev scores and a later cell can be its same run, as on the first machine;
what needs its weights (an evaluation of its export, a group that continues its training) stops
with one line naming the cell. An archived cell is this cell's run only if it ran with this cell's
arguments (the ones a dev choice put in aside, in today's spelling): one that ran otherwise (an
amended protocol, another sweep's archive at the same place, another thread count) is left where
it is, with a line saying which argument differs, and the cell runs here.

The protocol record comes first: when the sweep's own folder has no ``sweep.json``, the archive's
is copied in before this start is appended, so the record still shows the protocol's first start
(before any result) and every start since, with any change of code or config between them.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path

from clipmag.config.spellings import current_spelling
from clipmag.results.record import RESULTS_FILE
from clipmag.runtime.logs import logger
from clipmag.storage.files import write_text_atomic
from clipmag_experiments.cells.restored import RESTORED_FILE
from clipmag_experiments.design.grid import CELL_FILE, Cell
from clipmag_experiments.design.protocol import PROTOCOL_FILE
from clipmag_experiments.sweep.archive import CELL_FILES

__all__ = ["archived_run", "ran_otherwise", "restore_cells", "restore_protocol"]


def restore_protocol(archive: Path, output_dir: Path) -> None:
    """Copy the archive's ``sweep.json`` into a sweep folder that has none (its record continues)."""
    source, target = archive / PROTOCOL_FILE, output_dir / PROTOCOL_FILE
    if source.is_file() and not target.exists():
        output_dir.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)


def _without_output(argv: list[str]) -> list[str]:
    """``argv`` without ``--output FOLDER``: where a run writes is not what it computes (another
    sweep's archive holds the same run under its own folder)."""
    if "--output" in argv and argv.index("--output") + 1 < len(argv):
        at = argv.index("--output")
        return argv[:at] + argv[at + 2 :]
    return argv


def ran_otherwise(cell: Cell, archived: dict) -> str | None:
    """How the archived cell's arguments (its ``cell.json``) differ from ``cell``'s, or None: the
    arguments its dev choice inserted (``chosen.args``) are set aside, since the cell not yet run
    has not chosen, and both are read in today's spelling."""
    ran = list(archived.get("argv") or [])
    for arg in (archived.get("chosen") or {}).get("args", []):
        if arg in ran:
            ran.remove(arg)
    ran, given = current_spelling(_without_output(ran)), current_spelling(_without_output(list(cell.argv)))
    if ran == given:
        return None
    only_there = [a for a in ran if a not in given]
    only_here = [a for a in given if a not in ran]
    if only_there or only_here:
        return f"there {' '.join(only_there) or 'nothing more'}, here {' '.join(only_here) or 'nothing more'}"
    return "the same arguments in another order"


def archived_run(cell: Cell, archive: Path, output_dir: Path) -> tuple[Path | None, str | None]:
    """Where ``archive`` holds ``cell``'s finished run (its folder under ``output_dir`` mirrored
    there, with results and the cell's description, run with this cell's arguments), else None; and
    how an archived run with other arguments differs (:func:`ran_otherwise`), else None. Restoring a
    cell and counting its archived numerics before a sweep starts both ask this one question."""
    source = archive / cell.directory.relative_to(output_dir)
    if not (source / RESULTS_FILE).is_file() or not (source / CELL_FILE).is_file():
        return None, None  # nothing archived, or results without the cell's description: not a sweep cell
    why = ran_otherwise(cell, json.loads((source / CELL_FILE).read_text(encoding="utf-8")))
    return (source if why is None else None), why


def restore_cells(cells: Sequence[Cell], archive: Path, output_dir: Path) -> list[Cell]:
    """Copy every archived finished cell that ``output_dir`` lacks back in; the cells restored. No
    archive yet (the first sitting) is one line: every cell runs here."""
    if not archive.is_dir():
        logger.warning("restore_from %s: no archive there yet, so no cell is restored: every cell runs here", archive)
        return []
    restored = []
    for cell in cells:
        if (cell.directory / RESULTS_FILE).exists():
            continue
        source, why = archived_run(cell, archive, output_dir)
        if why is not None:
            logger.warning(
                "restore_from %s: %s ran otherwise (%s), so it is not restored: it runs here", archive, cell.label, why
            )
        if source is None:
            continue
        cell.directory.mkdir(parents=True, exist_ok=True)
        for name in CELL_FILES:
            if (source / name).is_file():
                shutil.copy2(source / name, cell.directory / name)
        evaluations = source / "evaluations"
        if evaluations.is_dir():
            shutil.copytree(evaluations, cell.directory / "evaluations", dirs_exist_ok=True)
        write_text_atomic(cell.directory / RESTORED_FILE, json.dumps({"from": str(source)}) + "\n")
        restored.append(cell)
    if restored:
        logger.info("%d finished cells restored from %s", len(restored), archive)
    return restored
