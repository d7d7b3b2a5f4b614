"""A sweep front end that trains the toy task with the real engine (checkpoints, resume, stop
signals, ranks from torchrun or srun) and writes a results.json a sweep accepts as finished; its
losses are the ones metrics.jsonl logs. For launcher tests, where a cell must really train.

Arguments: a sweep cell's (``--norm H --seed N --output DIR --resume latest``) plus ToyConfig keys.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine_worker import run  # noqa: E402

from clipmag.results.record import build_results, write_results  # noqa: E402
from clipmag.runtime import distributed as dist_utils  # noqa: E402
from clipmag.runtime.logs import read_metrics  # noqa: E402
from clipmag.scoring.head_record import HeadRecord  # noqa: E402

GLOBAL_BATCH = 8  # split over the ranks, so a cell on two nodes trains on the batches of one process


def _split(argv: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    flags, overrides, words = {}, [], list(argv)
    while words:
        word = words.pop(0)
        if word.startswith("--"):
            flags[word[2:]] = words.pop(0)
        else:
            overrides.append(word)
    return flags, overrides


def parse_args(argv: Sequence[str]) -> dict[str, str]:
    flags, _ = _split(argv)
    missing = {"norm", "seed", "output"} - set(flags)
    if missing:
        raise ValueError(f"toy engine front end: missing {sorted(missing)}")
    return flags


def main(argv: Sequence[str]) -> None:
    flags, overrides = _split(argv)
    out = flags["output"]
    keys = [f"head.name={flags['norm']}", f"train.seed={flags['seed']}"]
    keys += [f"train.resume={flags['resume']}"] if "resume" in flags else []
    world = int(dist_utils.launcher_environment().get("WORLD_SIZE", "1"))
    cfg = run(out, GLOBAL_BATCH // world, [*keys, *overrides])
    if dist_utils.environment_rank() != 0:
        return
    losses = [r["loss"] for r in read_metrics(Path(out) / "metrics.jsonl", "train")]
    record = build_results(
        {"front_end": "toy-engine", "seed": cfg.train.seed},
        HeadRecord({"name": flags["norm"]}),
        {"path": str(Path(out) / "checkpoints" / "latest.pt")},
        {"toy": {"final_loss": losses[-1]}},
        {},
        {},
    )
    write_results(record, out)
