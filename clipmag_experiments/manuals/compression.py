"""The figures of docs/deploy.md's "what it shows" under compression, read from
``results/deploy/compression.json``, so each sentence says what the stored table says (the drift
test re-renders them with every other mark).

A mark names rows as ``DATASET/MODEL/HEAD/LEVEL`` (``scifact/all-MiniLM-L6-v2/dot/truncate:128``;
``none`` is fp32, ``+norm`` the norm-keeping variant of a level).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from clipmag_experiments.report.stored import StoredResults

__all__ = ["VALUES"]

FP32 = "none"
NORM_HEADS = ("dot", "qnorm")  # the heads that read the document norm


def _rows(stored: StoredResults) -> list[dict[str, Any]]:
    """The stored rows (a small file, read per mark)."""
    return json.loads((stored.root / "deploy" / "compression.json").read_text(encoding="utf-8"))["rows"]


def _score(rows: list[dict[str, Any]], argument: str) -> float:
    parts = argument.split("/")
    if len(parts) != 4:
        raise ValueError(f"compression mark: expected DATASET/MODEL/HEAD/LEVEL, got {argument!r}")
    dataset, model, head, level = parts
    for row in rows:
        if (row["dataset"], row["model"], row["head"], row["compression"]) == (dataset, model, head, level):
            return float(row["ndcg10"])
    raise ValueError(f"compression mark: no stored row {argument!r}")


def _pairs(rows: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The (dataset, model) pairs measured, in their order."""
    return list(dict.fromkeys((r["dataset"], r["model"]) for r in rows))


def ndcg(stored: StoredResults, argument: str) -> str:
    """``DATASET/MODEL/HEAD/LEVEL``: the row's nDCG@10."""
    return f"{_score(_rows(stored), argument):.4f}"


def loss(stored: StoredResults, argument: str) -> str:
    """``DATASET/MODEL/HEAD/LEVEL``: what the level costs the head against fp32 (fp32 minus it)."""
    dataset, model, head, _ = argument.split("/")
    rows = _rows(stored)
    return f"{_score(rows, f'{dataset}/{model}/{head}/{FP32}') - _score(rows, argument):.3f}"


def gap(stored: StoredResults, argument: str) -> str:
    """``LEVEL,LEVEL``: the largest distance from fp32 of any row at those levels, plain or
    norm-keeping, rounded up to the third decimal (the "within" of a sentence)."""
    rows, levels = _rows(stored), argument.split(",")
    fp32 = {(r["dataset"], r["model"], r["head"]): float(r["ndcg10"]) for r in rows if r["compression"] == FP32}
    distances = [
        abs(float(r["ndcg10"]) - fp32[(r["dataset"], r["model"], r["head"])])
        for r in rows
        if r["compression"].removesuffix("+norm") in levels
    ]
    if not distances:
        raise ValueError(f"compression mark: no stored rows at {argument!r}")
    return f"{math.ceil(max(distances) * 1000) / 1000:.3f}"


def _norm_heads_lose_more(rows: list[dict[str, Any]], pair: tuple[str, str], level: str) -> bool:
    cost = {
        h: _score(rows, f"{pair[0]}/{pair[1]}/{h}/{FP32}") - _score(rows, f"{pair[0]}/{pair[1]}/{h}/{level}")
        for h in ("cosine", *NORM_HEADS)
    }
    return all(cost[h] > cost["cosine"] for h in NORM_HEADS)


def truncation(stored: StoredResults, argument: str) -> str:
    """``LEVEL``: in how many model and data set pairs the level costs dot and qnorm more than
    cosine, and which pairs go the other way (``3 of 4 (not cranfield's all-MiniLM-L6-v2)``)."""
    rows = _rows(stored)
    pairs = _pairs(rows)
    other = [f"{d}'s {m}" for d, m in pairs if not _norm_heads_lose_more(rows, (d, m), argument)]
    found = f"{len(pairs) - len(other)} of {len(pairs)}"
    return found + (f" (not {', '.join(other)})" if other else "")


def cosine_above_dot(stored: StoredResults, argument: str = "") -> str:
    """In how many model and data set pairs cosine ranks above dot at fp32 (``4 of 4``)."""
    rows = _rows(stored)
    pairs = _pairs(rows)
    above = sum(_score(rows, f"{d}/{m}/cosine/{FP32}") > _score(rows, f"{d}/{m}/dot/{FP32}") for d, m in pairs)
    return f"{above} of {len(pairs)}"


def same_ranking(stored: StoredResults, argument: str = "") -> str:
    """Whether qnorm scores as dot and dnorm as cosine in every row (as the heads define it):
    ``at every level``, else how many rows differ."""
    rows = _rows(stored)
    differ = 0
    for row in rows:
        twin = {"qnorm": "dot", "dnorm": "cosine"}.get(row["head"])
        if (
            twin
            and abs(_score(rows, f"{row['dataset']}/{row['model']}/{twin}/{row['compression']}") - row["ndcg10"]) > 1e-9
        ):
            differ += 1
    return "at every level" if differ == 0 else f"except in {differ} rows"


VALUES: dict[str, Callable[[StoredResults, str], str]] = {
    "compression-ndcg": ndcg,
    "compression-loss": loss,
    "compression-gap": gap,
    "compression-truncation": truncation,
    "compression-cosine-above-dot": cosine_above_dot,
    "compression-same-ranking": same_ranking,
}
