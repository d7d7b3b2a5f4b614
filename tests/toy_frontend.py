"""A stand-in trainer for sweep tests: records its calls, writes results.json, can be made to fail:
killed (``FAIL_ON``, Ctrl-C), broken (the argument ``toy.fail=1``, in any process, torchrun's too) or
diverged (``DIVERGE_AT``: the head and loss scale whose run stops as the trainer's guard stops it)."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from clipmag.results.record import build_results, write_results
from clipmag.scoring.head_record import HeadRecord
from clipmag.train.diverged_record import record_divergence
from clipmag.train.train_step import TrainingDiverged

CALLS: list[list[str]] = []
FAIL_ON: set[str] = set()
# (export folder, head name) -> None: set by a test to write a real export next to results.json
EXPORT: list[Callable[[Path, str], None]] = []
# the loss scale at which each head scores best; a cell's score falls off with log-distance from it
BEST_SCALE = {"cosine": 20.0, "dot": 1.0, "qnorm": 5.0, "dnorm": 20.0, "learnable": 5.0}
# the learning rate at which a head scores best (none: the rate does not matter to it)
BEST_LR: dict[str, float] = {}
# (head, loss scale) whose run diverges at step 1, recording it as the trainer does
DIVERGE_AT: set[tuple[str, float]] = set()


def main(argv: Sequence[str]) -> None:
    argv = list(argv)
    CALLS.append(argv)
    opts = {argv[i][2:]: argv[i + 1] for i in range(len(argv) - 1) if argv[i].startswith("--")}
    out = Path(opts["output"])
    if opts.get("norm") in FAIL_ON:
        (out / "checkpoints").mkdir(parents=True, exist_ok=True)
        raise KeyboardInterrupt(f"killed while running {opts['norm']}")
    if "toy.fail=1" in argv:
        (out / "checkpoints").mkdir(parents=True, exist_ok=True)
        raise RuntimeError(f"toy trainer broke while running {opts['norm']}")
    scales = [float(a.split("=", 1)[1]) for a in argv if a.startswith("loss.scale=")]
    if scales and (opts["norm"], scales[-1]) in DIVERGE_AT:
        message = f"training diverged at step 1: loss = 2e+04 (limit 1e+04) under {opts['norm']}"
        record_divergence(out, 1, "loss", 2e4, 1e4, message)
        raise TrainingDiverged(message)
    score = {"cosine": 0.5, "dot": 0.4, "qnorm": 0.45, "dnorm": 0.48, "learnable": 0.47}[opts["norm"]] + 0.01 * int(
        opts["seed"]
    )
    if scales:
        score -= 0.01 * abs(math.log(scales[-1] / BEST_SCALE[opts["norm"]]))
    rates = [float(a.split("=", 1)[1]) for a in argv if a.startswith("optim.lr=")]
    if rates and opts["norm"] in BEST_LR:
        score -= 0.01 * abs(math.log(rates[-1] / BEST_LR[opts["norm"]]))
    record = build_results(
        {"front_end": "toy"},
        HeadRecord({"name": opts["norm"]}),
        {"path": str(out)},
        {"toy": {"NDCG@10": score, "MRR@10": score - 0.1}},
        {"NDCG@10": 1.0 - score},  # the dev split disagrees with test: a choice shows which it read
        {},
    )
    for export in EXPORT:
        export(out / "export", opts["norm"])
    write_results(record, out)


if __name__ == "__main__":  # a cell under torchrun (launcher: torchrun)
    main(sys.argv[1:])
