"""The registry of evaluations a sweep attaches to its trained cells, and the report reads back.

An evaluation is a module with two functions:

* ``main(argv)`` evaluates one exported model; the sweep calls it with the evaluation's own
  arguments followed by ``--model <cell>/export --output <folder>``, so the model scores with the
  head its export records, and the folder holds ``results.json`` when it is done;
* ``parse_args(argv)`` (optional) checks those arguments and runs nothing, so a sweep finds a bad
  evaluation before its first cell trains;
* ``read_evaluation(folder)`` returns an :class:`EvaluationResult`: metrics per dataset and, per
  question, the outcomes a paired test over questions needs.

Evaluations register themselves through :mod:`clipmag.registry.plugins` (the text front end's ``rag`` and
``predict`` do so), named by module and imported only when used, so the core never names a front
end. A project of its own calls ``register_evaluation``.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from clipmag.registry.plugins import check_arguments, load_plugins
from clipmag.runtime.logs import caller_logging_kept

__all__ = ["Evaluation", "EvaluationResult", "EVALUATIONS", "register_evaluation", "get_evaluation"]


@dataclass
class EvaluationResult:
    """``metrics[dataset][metric]`` and ``outcomes[dataset][question_id][metric]`` (one value per question)."""

    metrics: dict[str, dict[str, float]]
    outcomes: dict[str, dict[str, dict[str, float]]]


@dataclass(frozen=True)
class Evaluation:
    """An evaluation kind: its module, the front ends whose exports it can load, the metrics to report,
    and ``precision_key``: the argument (``KEY=VALUE``) that sets what it encodes in, through which a
    sweep passes a cell's pinned ``train.precision``, so the cell's evaluation computes as the cell
    did (None: it has none)."""

    name: str
    module: str
    front_ends: tuple[str, ...]
    metrics: tuple[str, ...]
    precision_key: str | None = None

    def run(self, model: Path, output: Path, argv: Sequence[str] = ()) -> None:
        with caller_logging_kept():
            importlib.import_module(self.module).main([*argv, "--model", str(model), "--output", str(output)])

    def check(self, model: Path, output: Path, argv: Sequence[str] = ()) -> None:
        """Parse the arguments ``run`` would pass with the module's ``parse_args`` (when it has one),
        running nothing: a sweep checks every evaluation before its first cell trains."""
        check_arguments(self.module, [*argv, "--model", str(model), "--output", str(output)])

    def read(self, folder: Path) -> EvaluationResult:
        return importlib.import_module(self.module).read_evaluation(folder)


EVALUATIONS: dict[str, Evaluation] = {}


def register_evaluation(
    name: str, module: str, front_ends: Sequence[str], metrics: Sequence[str], precision_key: str | None = None
) -> Evaluation:
    EVALUATIONS[name] = Evaluation(name, module, tuple(front_ends), tuple(metrics), precision_key)
    return EVALUATIONS[name]


def get_evaluation(name: str) -> Evaluation:
    if name not in EVALUATIONS:
        raise ValueError(f"unknown evaluation kind {name!r}; valid: {', '.join(EVALUATIONS)}")
    return EVALUATIONS[name]


load_plugins()  # the front ends register their evaluations (clipmag.plugins)
