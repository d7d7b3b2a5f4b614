"""Which retrieved documents become a query's hard negatives: the selection rules, free of any model.

A query arrives with its candidates ranked by the head's score (best first), the ids of all its
known positives and its positive score. The rules, in order:

1. **Known positives are never negatives.** Every candidate that is one of the query's positives
   (all its judged documents; ``mining.py`` keys the corpus by text, so a copy of a positive's text
   is the positive) is dropped first, and **ranks count the remaining candidates only**: rank 0 is
   the best non-positive document, as in sentence-transformers' ``mine_hard_negatives``.
2. **Rank window.** Only ranks ``rank_min <= rank < rank_max`` are candidates (``rank_min`` skips
   the very top, where unjudged positives are likeliest).
3. **Margin to the positive.** With ``absolute_margin`` m a candidate scoring above
   ``positive_score - m`` is skipped; with ``relative_margin`` r one scoring above
   ``positive_score - |positive_score| * r`` is (0.05 keeps only candidates at least 5% of the
   positive's magnitude below it, NV-Retriever's TopK-PercPos). Both may be set; each applies.
   The relative margin is the one that means the same under every head: a magnitude head (dot,
   qnorm) scales scores by document norms, so an absolute margin tuned for cosine does not carry
   over. A query with several positives is measured against the lowest-scoring one (the safe side).
4. **Score cap.** A candidate scoring above ``max_score`` is skipped (a likely false negative).
5. **Sampling** ``k = num_negatives`` of the survivors: ``top`` takes the best-ranked, ``random``
   draws k without replacement from a generator seeded by ``seed`` and the query's text, so a
   query's draw depends on neither the order nor the other queries. Chosen negatives are kept in
   rank order. A query with fewer than k survivors keeps what it has (the summary counts them).

Margins and the cap apply inside the window, so the window means the same ranks whatever they
skip. sentence-transformers' ``mine_hard_negatives`` counts otherwise: it applies the margins and
the cap first and then skips the first ``range_min`` *survivors* (and keeps at most ``range_max``
of them), so with ``range_min > 0`` and a margin or cap that removes something near the top, its
window starts deeper in the ranking than this one (on SciFact train, ranks 10-50 with a relative
margin of 0.05, the two chose the same set for 55% of the negatives). ``semantics =
"sentence-transformers"`` counts as it does, so that its argument names mean what its users expect:
the window over the survivors, and (``mining.py``) the query's own text never a negative and one
more candidate searched for it. Without margins and cap, or with ``rank_min = 0`` and sampling
``top`` whenever the window holds k survivors, both semantics choose the same documents;
``tests/test_mine_negatives.py`` checks ours against it in every case and the
sentence-transformers semantics with ``rank_min`` 10 and a relative margin. Its ``random`` draws
come from Python's global random state, so only ``top`` compares.
"""

from __future__ import annotations

import zlib
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from clipmag.config.checks import Fraction, NonNegativeFloat, NonNegativeInt, PositiveInt

__all__ = ["SAMPLINGS", "SEMANTICS", "MiningRules", "Selection", "select_negatives", "summarize"]

SAMPLINGS = ("top", "random")
SEMANTICS = ("clipmag", "sentence-transformers")
SKIP_REASONS = ("positive", "margin", "max_score")


@dataclass(frozen=True)
class MiningRules:
    """The selection settings (module docstring); checked on construction. The miner's command line
    nests them as its ``rules`` section (``--rank-min 10`` sets ``rules.rank_min``)."""

    num_negatives: PositiveInt = 3
    rank_min: NonNegativeInt = 0
    rank_max: PositiveInt = 100
    absolute_margin: NonNegativeFloat | None = None
    relative_margin: Fraction | None = None
    max_score: float | None = None
    sampling: Literal["top", "random"] = "top"
    seed: NonNegativeInt = 0  # random sampling's seed (the miner shuffles its samples with it too)
    semantics: Literal["clipmag", "sentence-transformers"] = "clipmag"

    def __post_init__(self) -> None:
        if self.num_negatives < 1:
            raise ValueError(f"num_negatives must be at least 1, got {self.num_negatives}")
        if not 0 <= self.rank_min < self.rank_max:
            raise ValueError(f"the rank window needs 0 <= rank_min < rank_max, got {self.rank_min} and {self.rank_max}")
        if self.num_negatives > self.rank_max - self.rank_min:
            raise ValueError(
                f"num_negatives={self.num_negatives} cannot fit ranks {self.rank_min}-{self.rank_max} "
                f"({self.rank_max - self.rank_min} candidates): lower num_negatives or widen the window"
            )
        for name in ("absolute_margin", "relative_margin"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"{name} must be >= 0, got {value}")
        if self.sampling not in SAMPLINGS:
            raise ValueError(f"sampling {self.sampling!r} unknown; valid: {', '.join(SAMPLINGS)}")
        if self.semantics not in SEMANTICS:
            raise ValueError(f"semantics {self.semantics!r} unknown; valid: {', '.join(SEMANTICS)}")

    def threshold(self, positive_score: float) -> float:
        """The highest score a candidate may have under the margins (``inf`` without margins)."""
        limits = [np.inf]
        if self.absolute_margin is not None:
            limits.append(positive_score - self.absolute_margin)
        if self.relative_margin is not None:
            limits.append(positive_score - abs(positive_score) * self.relative_margin)
        return float(min(limits))


@dataclass
class Selection:
    """One query's negatives (candidate ids and scores, in rank order) and what was skipped why."""

    ids: list[int]
    scores: list[float]
    skipped: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SKIP_REASONS, 0))


def _generator(seed: int, key: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(key.encode("utf-8"))])


def select_negatives(
    candidates: Sequence[int],
    scores: Sequence[float],
    positives: Collection[int],
    positive_score: float,
    rules: MiningRules,
    key: str = "",
) -> Selection:
    """Apply the rules to one query's ``candidates`` (ids, best first) with their ``scores``.

    ``positives``: the ids of every known positive of the query; ``positive_score``: the score the
    margins are measured from; ``key``: the query's text, which seeds its ``random`` draw.
    """
    if len(candidates) != len(scores):
        raise ValueError(f"{len(candidates)} candidates but {len(scores)} scores")
    skipped = dict.fromkeys(SKIP_REASONS, 0)
    ranked = [(c, s) for c, s in zip(candidates, scores) if c not in positives]
    skipped["positive"] = len(candidates) - len(ranked)
    threshold = rules.threshold(positive_score)
    cap = np.inf if rules.max_score is None else rules.max_score

    def passing(pairs: Iterable[tuple[int, float]]) -> list[tuple[int, float]]:
        kept = []
        for candidate, score in pairs:
            if score > threshold:
                skipped["margin"] += 1
            elif score > cap:
                skipped["max_score"] += 1
            else:
                kept.append((candidate, float(score)))
        return kept

    if rules.semantics == "sentence-transformers":  # the window counts the survivors
        survivors = passing(ranked)[rules.rank_min : rules.rank_max]
    else:
        survivors = passing(ranked[rules.rank_min : rules.rank_max])
    k = min(rules.num_negatives, len(survivors))
    if rules.sampling == "random" and k < len(survivors):
        picked = np.sort(_generator(rules.seed, key).choice(len(survivors), size=k, replace=False))
        survivors = [survivors[i] for i in picked]
    chosen = survivors[:k]
    return Selection([c for c, _ in chosen], [s for _, s in chosen], skipped)


def summarize(selections: Iterable[Selection], positive_scores: Sequence[float], rules: MiningRules) -> dict[str, Any]:
    """Counts over all queries: how many got fewer than k negatives (or none), what was skipped
    why, and the mean positive and negative scores (the gap the margins act on)."""
    selections = list(selections)
    counts = [len(s.ids) for s in selections]
    negative_scores = [x for s in selections for x in s.scores]
    return {
        "queries": len(selections),
        "negatives": int(sum(counts)),
        "queries_fewer_than_k": sum(c < rules.num_negatives for c in counts),
        "queries_without_negatives": sum(c == 0 for c in counts),
        "skipped": {reason: sum(s.skipped[reason] for s in selections) for reason in SKIP_REASONS},
        "mean_positive_score": float(np.mean(positive_scores)) if len(positive_scores) else None,
        "mean_negative_score": float(np.mean(negative_scores)) if negative_scores else None,
    }
