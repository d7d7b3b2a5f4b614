"""The peer's side of ``bench_train_text.py``: sentence-transformers' trainer on the same pairs, timed
per step the way our side is (a timestamp at the start of every step)."""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class RoundResult:
    """One timed window: its wall-clock throughput and length."""

    samples_per_s: float
    seconds: float


def window(marks: list[float], warmup: int, steps: int, batch_size: int) -> RoundResult:
    """Throughput between the start of step ``warmup`` and the start of step ``warmup + steps``."""
    if len(marks) < warmup + steps + 1:
        raise RuntimeError(f"expected at least {warmup + steps + 1} step marks, got {len(marks)}")
    timed = marks[warmup : warmup + steps + 1]
    return RoundResult(steps * batch_size / (timed[-1] - timed[0]), timed[-1] - timed[0])


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


def run_theirs(args: argparse.Namespace, dataset: Any, work: Path, bf16: bool) -> RoundResult:
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from transformers import PrinterCallback, TrainerCallback

    marks: list[float] = []

    class StepMarks(TrainerCallback):
        def on_step_begin(self, *_: Any, **__: Any) -> None:
            marks.append(time.perf_counter())

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
            bf16=bf16,
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
