"""The arguments a cell's evaluation runs with: the group's, plus the cell's pinned precision.

Why: a cell that pins ``train.precision`` (the powered fight's MiniLM starts train and test in
fp32 on every CPU) validates and tests in it, but an evaluation loads the export afresh, and at its
own default (``auto``) it would encode in bf16 on a CPU with bf16 units: the dev scores a choice's
margin is read from would then come from other numbers than the run's own. An evaluation that
declares the argument setting its precision (:attr:`clipmag.registry.evaluations.Evaluation.precision_key`)
gets the cell's, unless its own arguments set one.
"""

from __future__ import annotations

from clipmag.registry.evaluations import get_evaluation
from clipmag.registry.front_ends import get_front_end
from clipmag_experiments.design.grid import Cell, SweepEvaluation

__all__ = ["evaluation_argv"]


def evaluation_argv(cell: Cell, evaluation: SweepEvaluation) -> list[str]:
    """``evaluation``'s arguments for ``cell``: with ``KEY=PRECISION`` added where the cell pins a
    ``train.precision`` other than ``auto``, the evaluation takes one and its arguments set none."""
    argv = evaluation.argv()
    key = get_evaluation(evaluation.kind).precision_key
    if key is None or any(arg == f"--{key}" or arg.startswith((f"{key}=", f"--{key}=")) for arg in argv):
        return argv
    train = getattr(get_front_end(cell.kind).check(cell.argv), "train", None)
    precision = getattr(train, "precision", "auto")
    return argv if precision == "auto" else [*argv, f"{key}={precision}"]
